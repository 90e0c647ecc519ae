// rpsim gemm-check DIR through the real binary: issue #36's defects (a
// swapped file passed, a folder that is not a capture said "cannot read the
// manifest", an interrupted --infer printed nothing) and the schedule each
// row names (issue #40).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_cli.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path scratch(const std::string& what) {
  const fs::path d =
      fs::temp_directory_path() / ("rpsim-cli-manifest-" + what + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string file_name(int g) {
  char name[32];
  std::snprintf(name, sizeof name, "g%05d_mm.npz", g);
  return name;
}

// A capture of `count` fp16 -> fp32 mm calls on an H100 whose D the preset
// computed (rpsim gemm --dump), g00000_mm.npz ...; `m x n x k` each; from
// the third on, copies of the second.
fs::path capture(const std::string& what, int count, int m, int n, int k) {
  const fs::path dir = scratch(what);
  json gemms = json::array();
  for (int g = 0; g < count; ++g) {
    const std::string file = file_name(g);
    if (g > 1) {  // copies of the second: an rpsim gemm run each would take most of the test's time
      fs::copy_file(dir / file_name(1), dir / file);
    } else {
      const auto r =
          rpsim::test::run_cli("gemm --m " + std::to_string(m) + " --n " + std::to_string(n) + " --k " +
                               std::to_string(k) + " --input fp16 --seed " + std::to_string(g + 1) +
                               " --model cublas:h100:fp16:fp32 --dump " + (dir / file).string());
      REQUIRE(r.status == 0);
    }
    gemms.push_back({{"file", file},
                     {"call", g},
                     {"op", "mm"},
                     {"device", "NVIDIA H100 80GB HBM3"},
                     {"a_dtype", "float16"},
                     {"d_dtype", "float32"},
                     {"m", m},
                     {"n", n},
                     {"k", k},
                     {"alpha", 1.0},
                     {"beta", 0.0},
                     {"batch", nullptr},
                     {"batch_index", nullptr},
                     {"flags", json::object()}});
  }
  std::ofstream(dir / "manifest.json") << json{{"gemms", gemms}}.dump(1);
  return dir;
}

}  // namespace

TEST_CASE("cli gemm-check DIR: each row names its schedule, a folder of dumps is not a capture",
          "[cli][gemm_check]") {
  const fs::path dir = capture("rows", 2, 16, 16, 256);
  const auto ok = rpsim::test::run_cli("gemm-check " + dir.string());
  INFO(ok.output);
  CHECK(ok.status == 0);
  CHECK(ok.output.find("schedule guessed: ") != std::string::npos);
  CHECK(ok.output.find("2 passed, 0 failed") != std::string::npos);
  // Issue 36 (13): a folder without manifest.json.
  fs::remove(dir / "manifest.json");
  const auto plain = rpsim::test::run_cli("gemm-check " + dir.string());
  INFO(plain.output);
  CHECK(plain.status == 2);
  CHECK(plain.output.find("has no manifest.json") != std::string::npos);
  CHECK(plain.output.find((dir / "g00000_mm.npz").string() + " --model MODEL") != std::string::npos);
  CHECK(plain.output.find("cannot read the manifest") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli gemm-check DIR: a file swapped for another GEMM's exits 2 naming both (issue 36.8)",
          "[cli][gemm_check]") {
  const fs::path dir = capture("swap", 2, 16, 16, 256);
  // g00000_mm.npz replaced by a GEMM of another shape.
  REQUIRE(rpsim::test::run_cli("gemm --m 8 --n 4 --k 64 --input fp16 --model cublas:h100:fp16:fp32 --dump " +
                               (dir / "g00000_mm.npz").string())
              .status == 0);
  for (const char* mode : {"", " --infer"}) {
    const auto r = rpsim::test::run_cli("gemm-check " + dir.string() + mode);
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find("g00000_mm.npz is not the GEMM of manifest entry gemms[0] (mm 16x16x256") !=
          std::string::npos);
    CHECK(r.output.find("A is 8x64, not 16x256") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("cli gemm-check DIR --infer: SIGINT prints the rows done and says it was interrupted (issue 36.12)",
          "[cli][gemm_check]") {
  // 40 calls, each a search of a few tenths of a second: the signal comes
  // once the first row is out, long before the last.
  const fs::path dir = capture("interrupt", 40, 64, 64, 2048);
  const fs::path out = dir / "out.txt", err = dir / "err.txt";
  const std::string cmd = "{ " + rpsim::test::rpsim_binary() + " gemm-check " + dir.string() + " --infer > " +
                          out.string() + " 2> " + err.string() +
                          " & pid=$!; for i in $(seq 600); do grep -q " + "'g00000_mm.npz' " + out.string() +
                          " && break; sleep 0.1; done; kill -INT $pid; " + "wait $pid; echo \"exit=$?\"; }";
  const auto r = rpsim::test::run_shell(cmd);
  std::ifstream o(out), e(err);
  const std::string stdout_text((std::istreambuf_iterator<char>(o)), {}),
      stderr_text((std::istreambuf_iterator<char>(e)), {});
  INFO(r.output << "\nstdout:\n" << stdout_text << "\nstderr:\n" << stderr_text);
  CHECK(r.output.find("exit=130") != std::string::npos);
  CHECK(stdout_text.find("    0  mm  64x64x2048  float16->float32  g00000_mm.npz: ") != std::string::npos);
  CHECK(stdout_text.find("interrupted: ") != std::string::npos);
  CHECK(stdout_text.find("of 40 calls searched") != std::string::npos);
  CHECK(stderr_text.find("rpsim gemm-check: interrupted after ") != std::string::npos);
  fs::remove_all(dir);
}
