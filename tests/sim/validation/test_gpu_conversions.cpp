// The emulator side of gpu-validate's conversion checks, without a GPU:
// CUDA's saturating conversions (facts measured on an H100), and the
// exhaustive range check through the array path agreeing with the scalar one.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <bit>
#include <limits>

#include "rpsim/formats/unpacked.hpp"
#include "rpsim/validation/gpu_validation.hpp"

using namespace rpsim;
using namespace rpsim::sim;

namespace {

constexpr std::uint32_t kPosInf = 0x7F800000u, kNegInf = 0xFF800000u;

ConversionSpec fp8(const Format& to, bool saturate) {
  return {"__nv_cvt_float_to_fp8", formats::binary32(), to, RoundingMode::nearest_even, saturate};
}

std::uint32_t bits(float f) {
  return std::bit_cast<std::uint32_t>(f);
}

}  // namespace

TEST_CASE("__NV_SATFINITE saturates infinities to the largest finite value, as on an H100",
          "[gpu-validation][conversion]") {
  // Measured with CUDA 13.0 on an H100 (issue 13): E5M2 from +-inf gives
  // 0x7B/0xFB (+-57344), not the infinity 0x7C/0xFC.
  const auto e5m2_sat = fp8(formats::e5m2(), true), e5m2 = fp8(formats::e5m2(), false);
  CHECK(emulate_conversion(e5m2_sat, kPosInf) == 0x7B);
  CHECK(emulate_conversion(e5m2_sat, kNegInf) == 0xFB);
  CHECK(emulate_conversion(e5m2, kPosInf) == 0x7C);
  CHECK(emulate_conversion(e5m2, kNegInf) == 0xFC);
  // Finite overflow saturates too (cuda_fp8.hpp: beyond maxnorm + 1/2 ulp).
  CHECK(emulate_conversion(e5m2_sat, bits(65536.0f)) == 0x7B);
  CHECK(emulate_conversion(e5m2_sat, bits(-1e30f)) == 0xFB);
  CHECK(emulate_conversion(e5m2, bits(65536.0f)) == 0x7C);
  // E4M3 has no infinity: saturating gives 0x7E/0xFE (448), not saturating NaN.
  const auto e4m3_sat = fp8(formats::e4m3(), true), e4m3 = fp8(formats::e4m3(), false);
  CHECK(emulate_conversion(e4m3_sat, kPosInf) == 0x7E);
  CHECK(emulate_conversion(e4m3_sat, kNegInf) == 0xFE);
  CHECK(is_nan(formats::e4m3(), emulate_conversion(e4m3, kPosInf)));
  CHECK(is_nan(formats::e4m3(), emulate_conversion(e4m3, bits(1000.0f))));
  // A NaN stays NaN when saturating.
  for (const auto& spec : {e5m2_sat, e4m3_sat})
    for (std::uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u})
      CHECK(is_nan(spec.to, emulate_conversion(spec, nan)));
}

TEST_CASE("every saturating conversion gpu-validate checks keeps its results finite, the others do not",
          "[gpu-validation][conversion]") {
  const auto specs = float_conversion_specs();
  REQUIRE(specs.size() == 12);
  int saturating = 0;
  for (const ConversionSpec& spec : specs) {
    INFO(spec.name);
    saturating += spec.saturate;
    for (std::uint32_t in : {kPosInf, kNegInf, bits(3.0e38f), bits(-3.0e38f)}) {
      const std::uint64_t out = emulate_conversion(spec, in);
      const Unpacked u = unpack(spec.to, out);
      CHECK(u.sign == (in >> 31 == 1));
      if (spec.saturate) {
        CHECK(out == spec.to.max_finite_bits(in >> 31));
      } else if (spec.to.has_inf() && (in & 0x7FFFFFFFu) == kPosInf) {
        CHECK(u.cls == Class::infinity);  // IEEE: an infinity converts exactly
      }
    }
  }
  CHECK(saturating == 2);  // E4M3 and E5M2 with __NV_SATFINITE
}

TEST_CASE("the exhaustive range check through the array path equals the scalar emulator",
          "[gpu-validation][conversion]") {
  // Windows around zero and the subnormals, 1, the top of each target's
  // range, the infinities and the NaNs, in both signs.
  const std::uint32_t starts[] = {0x00000000u, 0x3F7F0000u, 0x477F0000u, 0x43DF0000u, 0x7F7F0000u,
                                  0x7F7FFFF0u, 0x80000000u, 0xC77F0000u, 0xFF7FFFF0u, 0xFFFF0000u};
  for (const ConversionSpec& spec : float_conversion_specs()) {
    INFO(spec.name);
    for (const std::uint32_t first : starts) {
      const std::size_t n = std::min<std::uint64_t>(0x10000u, (std::uint64_t(1) << 32) - first);
      std::vector<std::uint32_t> in(n), got(n);
      for (std::size_t i = 0; i < n; ++i) {
        in[i] = std::uint32_t(first + i);
        got[i] = std::uint32_t(emulate_conversion(spec, in[i]));
      }
      BitCheck range;
      check_conversion_range(spec, first, got, range);
      INFO("from 0x" << std::hex << first
                     << (range.first_mismatches.empty() ? "" : ": " + range.first_mismatches[0]));
      CHECK(range.total == n);
      CHECK(range.passed == n);
      // A wrong bit is found and named by its input, the lowest first (a NaN
      // result may have any payload, so only non-NaN inputs are flipped).
      std::vector<std::size_t> flip;
      for (std::size_t i = 0; i < n; ++i)
        if (!is_nan(formats::binary32(), in[i])) flip.push_back(i);
      if (flip.size() < 2) continue;
      const std::size_t lo = flip[flip.size() / 2], hi = flip.back();
      got[hi] ^= 1;
      got[lo] ^= 1;
      BitCheck broken;
      check_conversion_range(spec, first, got, broken);
      CHECK(broken.total - broken.passed == 2);
      REQUIRE(broken.first_mismatches.size() == 2);
      CHECK_THAT(broken.first_mismatches[0], Catch::StartsWith(fmt::format("index {}:", first + lo)));
    }
  }
  BitCheck c;
  CHECK_THROWS_AS(check_conversion_range({"x", formats::binary16(), formats::e4m3()}, 0, {}, c),
                  std::invalid_argument);
}

TEST_CASE("__nv_cvt_fp8_to_halfraw's model keeps CUDA's NaN rule: every NaN is 0x7FFF",
          "[gpu-validation][conversion]") {
  // cuda_fp8.hpp's host path (and device code before sm_90) returns binary16
  // 0x7FFF for every E4M3 and E5M2 NaN, sign discarded; rpsim's own convert
  // keeps sign and payload (README, NaN conversions).
  for (const Format* from : {&formats::e4m3(), &formats::e5m2()}) {
    const ConversionSpec cuda{"__nv_cvt_fp8_to_halfraw",  *from, formats::binary16(),
                              RoundingMode::nearest_even, false, 0x7FFF};
    const ConversionSpec formats_rule{"convert", *from, formats::binary16()};
    INFO(from->name);
    int nans = 0;
    for (std::uint32_t x = 0; x < 256; ++x) {
      if (!is_nan(*from, x)) {
        CHECK(emulate_conversion(cuda, x) == emulate_conversion(formats_rule, x));
        continue;
      }
      ++nans;
      CHECK(emulate_conversion(cuda, x) == 0x7FFF);
      const std::uint64_t own = emulate_conversion(formats_rule, x);
      CHECK(is_nan(formats::binary16(), own));
      CHECK((own >> 15) == (x >> 7));  // the formats core keeps the sign
    }
    CHECK(nans == (from->man_bits == 3 ? 2 : 6));
  }
  // The range path applies the same rule to a binary32 source.
  const ConversionSpec f32{"x",   formats::binary32(), formats::binary16(), RoundingMode::nearest_even, false,
                           0x7FFF};
  std::vector<std::uint32_t> out(4);
  emulate_conversion_range(f32, 0xFFC00000u, out);
  for (std::uint32_t v : out) CHECK(v == 0x7FFF);
}
