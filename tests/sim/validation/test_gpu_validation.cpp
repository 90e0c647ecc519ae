// The host side of gpu-validate, fed with the shared real-GPU golden files
// and with this CPU's own conversion instructions standing in for a GPU.
#include <immintrin.h>

#include <unistd.h>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>

#include "cpu_features.hpp"
#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"
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
    RPSIM_SKIP("skipped: " << h100 << " is absent");
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
// Cases with the model's own results standing in for a GPU's.
GoldenSet predicted(const Format& in, const Format& out, std::size_t k, const std::string& instruction) {
  GoldenSet set = generate_mma_cases("H100", in, formats::binary32(), k, 50, 5);
  set.output = out;
  set.instruction = instruction;
  const TensorCoreModel m = tensor_core_preset("h100", in, out, instruction);
  for (auto& g : set.cases)
    g.d_bits =
        std::uint32_t(round_double(formats::binary32(), tensor_core_dot(m, g.a, g.b, golden_c(set, g))));
  return set;
}
}  // namespace

TEST_CASE("gpu-validate's golden folders read back with their preset, instruction and K",
          "[gpu-validation]") {
  const auto tmp =
      std::filesystem::temp_directory_path() / ("rpsim-golden-gpu-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  const Format &f16 = formats::binary16(), &f32 = formats::binary32();
  // mma.sync: fp16 to both outputs (sharing a, b, c) and tf32 with K = 8,
  // which tc-golden's H100 layout (K = 4) would refuse without the written K.
  write_golden_gpu(tmp / "H100", {predicted(f16, f32, 16, "mma.sync"), predicted(f16, f16, 16, "mma.sync"),
                                  predicted(formats::tf32(), f32, 8, "mma.sync")});
  // wgmma beside it, in a folder whose name is not a GPU's.
  write_golden_gpu(tmp / "H100-wgmma", {predicted(formats::e4m3(), f32, 32, "wgmma")});
  std::size_t sets = 0;
  for (const char* folder : {"H100", "H100-wgmma"}) {
    for (const GoldenSet& set : load_golden_gpu(tmp / folder)) {
      ++sets;
      INFO(folder << " " << set.input_folder << "->" << set.output.name);
      CHECK(set.gpu == "H100");
      CHECK(set.instruction == (std::string(folder) == "H100" ? "mma.sync" : "wgmma"));
      CHECK(set.c_loaded);
      const TensorCoreModel m = golden_model(set);
      CHECK(m.preset == "h100");
      CHECK(m.instruction == parse_tensor_core_instruction(set.instruction));
      const GoldenCheck c = check_golden(set, m);
      CHECK(c.total > 50);
      CHECK(c.passed == c.total);
    }
  }
  CHECK(sets == 4);
  // The wgmma results are not what mma.sync computes.
  const auto wg = load_golden_gpu(tmp / "H100-wgmma").front();
  CHECK(check_golden(wg, tensor_core_preset("h100", wg.input, wg.output, "mma.sync")).passed <
        wg.cases.size());
  const auto r = test::run_cli("tc-validate " + (tmp / "H100-wgmma").string());
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("H100 E4M3->fp32 [wgmma, C loaded]: "));
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
  if (!rpsim::test::cpu_has_f16c()) {
    RPSIM_SKIP("skipped: this CPU has no F16C to stand in for a GPU");
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

TEST_CASE("gpu-validate on a GPU: every kernel agrees with the emulator", "[gpu]") {
  const auto out =
      std::filesystem::temp_directory_path() / ("rpsim-gpu-validate-" + std::to_string(::getpid()));
  const auto r = test::run_cli("gpu-validate --cases 2000 --out " + out.string());
  if (r.status == 77) {
    // Nothing was checked, and it says so; ctest reports the test skipped
    // (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt).
    CHECK_THAT(r.output, Catch::Contains("nothing was checked"));
    RPSIM_SKIP("skipped: no CUDA device, nothing was checked");
  }
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains(" 0 failed"));
  // The golden files (<out>/H100, <out>/H100-wgmma, ...) read back with the
  // right preset and instruction.
  int folders = 0;
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    if (!std::filesystem::exists(e.path() / "conventions.json")) continue;
    ++folders;
    const auto back = test::run_cli("tc-validate " + e.path().string());
    INFO(back.output);
    CHECK(back.status == 0);
  }
  CHECK(folders >= 1);
  std::filesystem::remove_all(out);
}

TEST_CASE("gpu-validate documents the status that means nothing was checked", "[gpu-validation]") {
  const auto r = test::run_cli("gpu-validate --help");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("77 nothing was checked"));
  CHECK(test::run_cli("gpu-validate --model x900").status == 2);
}
