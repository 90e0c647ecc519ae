// Every vector measured on real GPUs (shared/tc-golden: V100, A100, Ada, H100;
// every input and output format) reproduced bit for bit by the presets.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/validation/tensor_core_golden.hpp"
#include "run_cli.hpp"
#include "shared_data.hpp"

namespace {

namespace fs = std::filesystem;
using namespace rpsim;
using namespace rpsim::sim;

fs::path golden_dir() {
  return rpsim::test::shared_dir() / "tc-golden";
}

void check_gpu(const std::string& gpu, std::size_t expected_sets) {
  const fs::path dir = golden_dir() / gpu;
  if (!fs::is_directory(dir)) {
    WARN("tc-golden/" << gpu << " not found under " << golden_dir().string() << ": golden test skipped");
    return;
  }
  const auto sets = load_golden_gpu(dir);
  CHECK(sets.size() == expected_sets);
  for (const auto& set : sets) {
    const auto model = golden_model(set);
    const auto r = check_golden(set, model, 3);
    INFO(gpu << " " << set.input_folder << "->" << set.output.name << " model " << model.name);
    for (const auto& m : r.first_mismatches) INFO(m);
    CHECK(r.total == 5000);
    CHECK(r.passed == r.total);
  }
}

}  // namespace

TEST_CASE("tc golden: V100 fp16 -> fp32 and fp16, bit-exact", "[tc][golden]") {
  check_gpu("V100", 2);
}
TEST_CASE("tc golden: A100 fp16, bf16, tf32, bit-exact", "[tc][golden]") {
  check_gpu("A100", 4);
}
TEST_CASE("tc golden: Ada fp16, bf16, tf32, E4M3, E5M2, bit-exact", "[tc][golden]") {
  check_gpu("Ada", 8);
}
TEST_CASE("tc golden: H100 fp16, bf16, tf32, E4M3, E5M2, bit-exact", "[tc][golden]") {
  check_gpu("H100", 8);
}
TEST_CASE("tc golden: H100 E4M3/E5M2 to fp16 is mma.sync's interleaved fp16 path, not the FP8 one",
          "[tc][golden]") {
  // The mma.sync FP8 -> fp16 sets are the preset's two interleaved binary16
  // steps with C added last (5000/5000 each, in the case above); the FP8
  // datapath of wgmma (one 32-product step, 13 bits) cannot reproduce them.
  const fs::path dir = golden_dir() / "H100";
  if (!fs::is_directory(dir)) {
    WARN("tc-golden/H100 not found: skipped");
    return;
  }
  int sets = 0;
  for (const auto& set : load_golden_gpu(dir)) {
    if (set.input.man_bits > 3 || set.output.man_bits != 10) continue;
    ++sets;
    const auto model = golden_model(set);
    INFO(set.input_folder << " model " << model.name);
    CHECK(model.step_interleave == 2);
    CHECK(model.c_join == CJoin::after_products);
    CHECK(check_golden(set, model, 0).passed == 5000);
    const auto fp8_path = tensor_core_preset("h100", set.input, set.output, "wgmma");
    CHECK(check_golden(set, fp8_path, 0).passed < 3500);
  }
  CHECK(sets == 2);
}

TEST_CASE("tc golden: the wrong preset is caught", "[tc][golden]") {
  // V100's preset (no extra alignment bit, 4 per step) on A100's vectors:
  // the golden check must be able to fail.
  const fs::path dir = golden_dir() / "A100";
  if (!fs::is_directory(dir)) {
    WARN("tc-golden/A100 not found: skipped");
    return;
  }
  for (const auto& set : load_golden_gpu(dir)) {
    if (set.input_folder != "fp16" || set.output.man_bits != 23) continue;
    auto model = golden_model(set, "h100");
    model.terms_per_step = 8;
    model.fraction_bits = 23;  // V100's alignment width
    const auto r = check_golden(set, model, 1);
    CHECK(r.passed < r.total);
  }
}

TEST_CASE("rpsim tc-validate: reports per set and exits 0 on a clean GPU folder", "[tc][golden][cli]") {
  const fs::path dir = golden_dir() / "V100";
  if (!fs::is_directory(dir)) {
    WARN("tc-golden/V100 not found: skipped");
    return;
  }
  const auto r = rpsim::test::run_cli("tc-validate " + dir.string());
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("V100 fp16->fp32: 5000/5000 bit-exact") != std::string::npos);
  CHECK(r.output.find("V100 fp16->fp16: 5000/5000 bit-exact") != std::string::npos);
  CHECK(r.output.find("10000 passed, 0 failed") != std::string::npos);

  const auto wrong = rpsim::test::run_cli("tc-validate " + dir.string() + " --model h100");
  CHECK(wrong.status == 1);
  CHECK(wrong.output.find("mismatch") != std::string::npos);
}

TEST_CASE("rpsim tc-validate: bad input exits 2 naming the file and line", "[tc][cli]") {
  const fs::path tmp = fs::temp_directory_path() / ("rpsim_tc_bad_" + std::to_string(::getpid()));
  const fs::path dir = tmp / "V100" / "fp16";
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) { std::ofstream(dir / name) << text; };
  const std::string c1 = "00111111100000000000000000000000\n";
  write("a_V100_fp16.txt", "3f800000 3f800000 3f800000 3f800000\n3f800000 3f800000 3f800000\n");
  write("b_V100_fp16.txt", "3f800000 3f800000 3f800000 3f800000\n3f800000 3f800000 3f800000 3f800000\n");
  write("c_V100_fp32.txt", c1 + c1);
  write("d_V100_fp32.txt", "01000000101000000000000000000000\n01000000101000000000000000000000\n");
  auto r = rpsim::test::run_cli("tc-validate " + (tmp / "V100").string());
  CHECK(r.status == 2);
  CHECK(r.output.find("a_V100_fp16.txt:2") != std::string::npos);

  write("a_V100_fp16.txt", "3f800000 3f800000 3f800000 3f800000\n3f800000 3f800000 3f800000 3f80000g\n");
  r = rpsim::test::run_cli("tc-validate " + (tmp / "V100").string());
  CHECK(r.status == 2);
  CHECK(r.output.find("a_V100_fp16.txt:2") != std::string::npos);

  write("a_V100_fp16.txt", "3f800000 3f800000 3f800000 3f800000\n3f800000 3f800000 3f800000 3f800000\n");
  r = rpsim::test::run_cli("tc-validate " + (tmp / "V100").string());
  CHECK(r.status == 0);  // 1+1+1+1+1 = 5 twice
  CHECK(r.output.find("2 passed, 0 failed") != std::string::npos);

  fs::remove(dir / "c_V100_fp32.txt");
  r = rpsim::test::run_cli("tc-validate " + (tmp / "V100").string());
  CHECK(r.status == 2);
  CHECK(r.output.find("c_V100_fp32.txt") != std::string::npos);
  fs::remove_all(tmp);
}
