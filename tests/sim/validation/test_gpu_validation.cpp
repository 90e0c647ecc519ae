// The host side of gpu-validate, fed with the shared real-GPU golden files
// and with this CPU's own conversion instructions standing in for a GPU.
#include <immintrin.h>

#include <unistd.h>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>

#include "rpsim/formats/ops.hpp"
#include "rpsim/validation/gpu_validation.hpp"
#include "run_cli.hpp"
#include "shared_data.hpp"

using namespace rpsim;
using namespace rpsim::sim;

TEST_CASE("generated tensor-core cases are representable, sized and deterministic", "[gpu-validation]") {
  for (const char* in : {"binary16", "bfloat16", "tf32", "e4m3", "e5m2"}) {
    const Format& f = format(in);
    const GoldenSet a = generate_mma_cases("H100", f, formats::binary32(), 16, 200, 7);
    const GoldenSet b = generate_mma_cases("H100", f, formats::binary32(), 16, 200, 7);
    REQUIRE(a.cases.size() > 200);  // patterns come on top of the random cases
    REQUIRE(a.cases.size() == b.cases.size());
    std::size_t nonzero = 0;
    for (std::size_t i = 0; i < a.cases.size(); ++i) {
      REQUIRE(a.cases[i].a.size() == 16);
      REQUIRE(a.cases[i].b.size() == 16);
      CHECK(a.cases[i].a == b.cases[i].a);
      CHECK(a.cases[i].c_bits == b.cases[i].c_bits);
      for (double v : a.cases[i].a) {
        Flags fl = 0;
        const std::uint64_t bits = round_double(f, v, Rounding{}, fl);
        INFO(in << " value " << v);
        CHECK((fl & flag_inexact) == 0);
        CHECK(to_double(f, bits) == v);
        nonzero += v != 0;
      }
    }
    CHECK(nonzero > a.cases.size() * 4);
  }
}

TEST_CASE("golden files written by gpu-validate read back identically and still validate",
          "[gpu-validation]") {
  const auto h100 = test::shared_dir() / "tc-golden" / "H100";
  if (!std::filesystem::exists(h100)) {
    WARN("skipped: " << h100 << " is absent");
    return;
  }
  const auto sets = load_golden_gpu(h100);
  REQUIRE(!sets.empty());
  const auto tmp = std::filesystem::temp_directory_path() / ("rpsim-golden-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  // fp16 has two outputs sharing a, b and c: write them as one folder.
  std::vector<GoldenSet> fp16;
  for (const auto& s : sets)
    if (s.input_folder == "fp16") fp16.push_back(s);
  REQUIRE(fp16.size() == 2);
  write_golden(tmp, fp16);
  const auto back = load_golden_gpu(tmp / "H100");
  REQUIRE(back.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    REQUIRE(back[i].cases.size() == fp16[i].cases.size());
    for (std::size_t j = 0; j < back[i].cases.size(); ++j) {
      CHECK(back[i].cases[j].a == fp16[i].cases[j].a);
      CHECK(back[i].cases[j].d_bits == fp16[i].cases[j].d_bits);
      CHECK(back[i].cases[j].c_bits == fp16[i].cases[j].c_bits);
    }
    const GoldenCheck c = check_golden(back[i], golden_model(back[i]));
    CHECK(c.passed == c.total);
  }
  // One flipped bit of a "GPU result" is reported, with its line.
  GoldenSet broken = back[0];
  broken.cases[3].d_bits ^= 1;
  const GoldenCheck c = check_golden(broken, golden_model(broken));
  CHECK(c.total - c.passed == 1);
  REQUIRE(c.first_mismatches.size() == 1);
  CHECK_THAT(c.first_mismatches[0], Catch::Contains("4"));
  std::filesystem::remove_all(tmp);
}

namespace {
__attribute__((target("f16c"))) std::uint32_t f16c_convert(std::uint32_t bits, int mode) {
  float f;
  std::memcpy(&f, &bits, 4);
  const __m128 v = _mm_set_ss(f);
  __m128i h;
  switch (mode) {
    case 0: h = _mm_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); break;
    case 1: h = _mm_cvtps_ph(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); break;
    case 2: h = _mm_cvtps_ph(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); break;
    default: h = _mm_cvtps_ph(v, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); break;
  }
  return std::uint32_t(_mm_extract_epi16(h, 0));
}
}  // namespace

TEST_CASE("the conversion comparator accepts a correct device and names a wrong bit", "[gpu-validation]") {
  if (!__builtin_cpu_supports("f16c")) {
    WARN("skipped: this CPU has no F16C to stand in for a GPU");
    return;
  }
  const RoundingMode modes[] = {RoundingMode::nearest_even, RoundingMode::toward_zero, RoundingMode::down,
                                RoundingMode::up};
  for (int m = 0; m < 4; ++m) {
    ConversionSpec spec{"__float2half", formats::binary32(), formats::binary16(), modes[m], false};
    const auto in = conversion_inputs(spec, 100000, 3);
    REQUIRE(in.size() > 100000);
    std::vector<std::uint32_t> got(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) got[i] = f16c_convert(in[i], m);
    BitCheck check;
    check_conversion(spec, in, got, check);
    INFO("mode " << m << (check.first_mismatches.empty() ? "" : ": " + check.first_mismatches[0]));
    CHECK(check.passed == check.total);
    got[17] ^= 0x1;
    BitCheck broken;
    check_conversion(spec, in, got, broken);
    CHECK(broken.total - broken.passed == 1);
    REQUIRE(broken.first_mismatches.size() == 1);
    CHECK_THAT(broken.first_mismatches[0], Catch::StartsWith("index 17:"));
  }
}

TEST_CASE("a device name or compute capability picks its tensor-core preset", "[gpu-validation]") {
  CHECK(preset_for_device("NVIDIA H100 80GB HBM3", 9, 0) == "h100");
  CHECK(preset_for_device("NVIDIA H200", 9, 0) == "h200");
  CHECK(preset_for_device("NVIDIA A100-SXM4-40GB", 8, 0) == "a100");
  CHECK(preset_for_device("NVIDIA L40S", 8, 9) == "l40s");
  CHECK(preset_for_device("NVIDIA GeForce RTX 4090", 8, 9) == "ada");
  CHECK(preset_for_device("Unknown", 6, 1).empty());
}

TEST_CASE("gpu-validate on a GPU: every kernel agrees with the emulator", "[gpu]") {
  const auto r = test::run_cli("gpu-validate --cases 2000 --out " +
                               (std::filesystem::temp_directory_path() / "rpsim-gpu-validate").string());
  if (r.output.find("skipped: no CUDA device") != std::string::npos) {
    WARN("skipped: no CUDA device");
    CHECK(r.status == 0);
    return;
  }
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains(" 0 failed"));
}
