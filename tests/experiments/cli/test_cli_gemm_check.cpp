// rpsim gemm-check through the real binary: a measured slice passes under its
// preset (exit 0) and fails under another model (exit 1, mismatches listed),
// --infer names the schedule, dumps written by `rpsim gemm --dump` and text
// matrices check out.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "run_cli.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;

namespace {

std::string data(const std::string& name) {
  return (rpsim::test::source_dir() / "tests" / "data" / "gemm" / name).string();
}

}  // namespace

TEST_CASE("cli gemm-check: a measured slice passes under its preset, fails under another",
          "[cli][gemm_check]") {
  const auto ok = rpsim::test::run_cli("gemm-check " + data("h100_e4m3_fp32_8x8x256.npz") +
                                       " --model cublas:h100:e4m3:fp32");
  INFO(ok.output);
  CHECK(ok.status == 0);
  CHECK(ok.output.find("schedule for 8x8x256: kernel:h100:e4m3:binary32:wgmma:promotion=4") !=
        std::string::npos);
  CHECK(ok.output.find("bit-exact: 64/64 elements") != std::string::npos);
  CHECK(ok.output.find("max_diff_ulps (binary32): 0") != std::string::npos);
  CHECK(ok.output.find("64 passed, 0 failed") != std::string::npos);
  const auto bad = rpsim::test::run_cli("gemm-check " + data("h100_e4m3_fp32_8x8x256.npz") +
                                        " --model kernel:h100:e4m3:fp32:wgmma --show 3");
  INFO(bad.output);
  CHECK(bad.status == 1);
  CHECK(bad.output.find("  mismatch row ") != std::string::npos);
  CHECK(bad.output.find(" failed") != std::string::npos);
  CHECK(bad.output.find(", 0 failed") == std::string::npos);
}

TEST_CASE("cli gemm-check --infer: the schedule of a measured tf32 slice", "[cli][gemm_check]") {
  const auto r =
      rpsim::test::run_cli("gemm-check " + data("h100_tf32_fp32_16x16x256.npz") + " --infer --threads 2");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("values: A and B binary32 (instruction input tf32), D binary32") != std::string::npos);
  CHECK(r.output.find("256/256  max 0 mean 0 ulps of binary32  "
                      "kernel:h100:tf32:binary32:stored=binary32:split_k=8:split_tile=32\n") !=
        std::string::npos);
  CHECK(r.output.find("named preset reproducing it: cublas:h100:tf32:binary32") != std::string::npos);
  // Issue #40: the kernel family is named.
  CHECK(r.output.find("family: split-K 8 x 32-k tiles, binary32 workspace") != std::string::npos);
  CHECK(r.output.find("256 passed, 0 failed") != std::string::npos);
}

// Issue 26: plain models were not searched (an exact-then-binary32 D got
// "best 2786/16384"); they come first, by the names --model takes, with the
// ulps of every candidate and the K order as a note.
TEST_CASE("cli gemm-check --infer: plain models by name, K order, ulps", "[cli][gemm_check]") {
  const fs::path tmp = fs::temp_directory_path() / ("rpsim-cli-infer-plain-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const std::string dump = (tmp / "exact.npz").string();
  REQUIRE(rpsim::test::run_cli("gemm --m 16 --n 16 --k 256 --input binary32 --model exact:binary32 --dump " +
                               dump)
              .status == 0);
  const auto r = rpsim::test::run_cli("gemm-check " + dump + " --infer 2>&1");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("models that reproduce every element:\n"
                                       "  256/256  max 0 mean 0 ulps of binary32  exact:binary32\n"));
  fs::remove_all(tmp);
}

TEST_CASE("cli gemm --dump writes what gemm-check reads, text matrices", "[cli][gemm_check]") {
  const fs::path tmp = fs::temp_directory_path() / ("rpsim-cli-gemm-check-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const std::string dump = (tmp / "run.npz").string();
  const auto g = rpsim::test::run_cli(
      "gemm --m 8 --n 8 --k 300 --input bf16 --model cublas:h100:bf16:bf16 --dump " + dump);
  REQUIRE(g.status == 0);
  const auto c = rpsim::test::run_cli("gemm-check " + dump + " --model cublas:h100:bf16:bf16");
  INFO(c.output);
  CHECK(c.status == 0);
  CHECK(c.output.find("64 passed, 0 failed") != std::string::npos);
  // D holds bf16 values stored as float32: a model with binary32 output reads
  // it fine and finds every element off (the dump cannot say D was bf16).
  const auto wrong = rpsim::test::run_cli("gemm-check " + dump + " --model tc:h100:bf16:fp32");
  CHECK(wrong.status == 1);
  CHECK(wrong.output.find("0 passed, 64 failed") != std::string::npos);
  std::ofstream(tmp / "A.txt") << "1 2\n3 4\n";
  std::ofstream(tmp / "B.txt") << "# identity\n1 0\n0 1\n";
  std::ofstream(tmp / "D.txt") << "1 2\n3 4.5\n";
  const auto t =
      rpsim::test::run_cli("gemm-check " + (tmp / "A.txt").string() + " " + (tmp / "B.txt").string() + " " +
                           (tmp / "D.txt").string() + " --format text --model tc:h100:fp16:fp32");
  INFO(t.output);
  CHECK(t.status == 1);
  CHECK(t.output.find("mismatch row 1 col 1: dump 4.5 model 4 (-1.049e+06 ulps of binary32)") !=
        std::string::npos);
  CHECK(t.output.find("3 passed, 1 failed") != std::string::npos);
  fs::remove_all(tmp);
}

TEST_CASE("cli gemm-check: experiments/python/dump_gemm.py writes what gemm-check reads",
          "[cli][gemm_check]") {
  if (rpsim::test::run_shell("/usr/bin/python3 -c 'import numpy'").status != 0) {
    RPSIM_SKIP("skipped: /usr/bin/python3 has no numpy (Debian's python3-numpy)");
  }
  const fs::path tmp = fs::temp_directory_path() / ("rpsim-cli-dump-gemm-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const std::string out = (tmp / "p.npz").string();
  const std::string py =
      "import sys; sys.path.insert(0, '" + (rpsim::test::source_dir() / "experiments" / "python").string() +
      "'); import numpy as np; from dump_gemm import dump_gemm; "
      "a = np.array([[1, 2, 3], [4, 5, 6]], np.float16); b = np.eye(3, 2, dtype=np.float16); "
      "dump_gemm('" +
      out + "', a, b, a.astype(np.float32) @ b.astype(np.float32))";
  const auto w = rpsim::test::run_shell("/usr/bin/python3 -c \"" + py + "\"");
  INFO(w.output);
  REQUIRE(w.status == 0);
  const auto c = rpsim::test::run_cli("gemm-check " + out + " --model tc:h100:fp16:fp32");
  INFO(c.output);
  CHECK(c.status == 0);
  CHECK(c.output.find("D stored as float32") != std::string::npos);
  CHECK(c.output.find("4 passed, 0 failed") != std::string::npos);
  fs::remove_all(tmp);
}
