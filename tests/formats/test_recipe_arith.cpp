// The per-element arithmetic of the recipes (recipe_arith*.hpp) against
// values worked out by hand from PyTorch's c10 casts, TE's E2M1 ladder and
// torchao's MXFP8 semantic cases (torchao/testing/_mxfp8_test_utils.py: named
// 32-entry blocks with the bytes expected under FLOOR and RCEIL, and the
// RCEIL E8M0 boundaries), written here from their stated facts.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "rpsim/formats/random.hpp"
#include "rpsim/formats/recipe.hpp"
#include "rpsim/formats/recipe_block.hpp"
#include "rpsim/formats/scalar_core.hpp"

using namespace rpsim;
using namespace rpsim::recipe;

namespace {

float bits(std::uint32_t b) {
  return f32_from_bits(b);
}

}  // namespace

TEST_CASE("recipe arith: c10 float8 casts (nearest even, E4M3FN NaN past 448, E5M2 infinity past 57344)",
          "[formats][recipes]") {
  CHECK(e4m3fn_from_f32(448.0f) == 0x7e);
  CHECK(e4m3fn_from_f32(464.0f) == 0x7e);  // the tie between 448 and 480 goes to even 448
  CHECK(e4m3fn_from_f32(464.5f) == 0x7f);  // rounds to 480: past the range, NaN
  CHECK(e4m3fn_from_f32(-std::numeric_limits<float>::infinity()) == 0xff);
  CHECK(e4m3fn_from_f32(-0.0f) == 0x80);
  CHECK(e4m3fn_from_f32(std::ldexp(1.0f, -10)) == 0x00);   // half the least subnormal 2^-9: even, 0
  CHECK(e4m3fn_from_f32(std::ldexp(1.5f, -10)) == 0x01);   // above half: 2^-9
  CHECK(e4m3fn_from_f32(std::ldexp(15.5f, -10)) == 0x08);  // 7.75 * 2^-9 rounds to 2^-6, the least normal
  CHECK(e5m2_from_f32(57344.0f) == 0x7b);
  CHECK(e5m2_from_f32(61440.0f) == 0x7c);  // the tie rounds to even: 65536, infinity
  CHECK(e5m2_from_f32(std::numeric_limits<float>::quiet_NaN()) == 0x7f);
  CHECK(e5m2_from_f32(-std::numeric_limits<float>::infinity()) == 0xfc);
  for (int c = 0; c < 256; ++c) {  // every finite code round-trips through its value
    if ((c & 0x7f) != 0x7f) CHECK(e4m3fn_from_f32(element_value(ElementKind::e4m3, std::uint8_t(c))) == c);
    if ((c & 0x7f) < 0x7c) CHECK(e5m2_from_f32(element_value(ElementKind::e5m2, std::uint8_t(c))) == c);
  }
}

TEST_CASE("recipe arith: TE's E2M1 ladder, torchao's saturating FP6/FP4 casts and MXINT8",
          "[formats][recipes]") {
  CHECK(e2m1_te_ladder(-0.0f) == 0);  // TE: x >= 0.0 holds for -0.0
  CHECK(e2m1_te_ladder(-0.25f) == 8);
  CHECK(e2m1_te_ladder(0.25f) == 0);
  CHECK(e2m1_te_ladder(0.75f) == 2);  // ties to even: 1.0
  CHECK(e2m1_te_ladder(5.0f) == 6);   // ties to even: 4
  CHECK(e2m1_te_ladder(5.0000005f) == 7);
  CHECK(e2m1_te_ladder(-1e30f) == 15);
  CHECK(e2m1_te_ladder(std::numeric_limits<float>::quiet_NaN()) == 0);
  CHECK(minifloat_sat_from_f32(-0.0f, 2, 1) == 0x8);  // torchao keeps the sign of zero
  CHECK(minifloat_sat_from_f32(100.0f, 3, 2) == 0x1f);
  CHECK(minifloat_sat_from_f32(-std::numeric_limits<float>::infinity(), 2, 3) == 0x3f);
  CHECK(minifloat_sat_from_f32(0.0625f, 2, 3) == 0x00);  // half the least E2M3 subnormal 0.125: even, 0
  CHECK(minifloat_sat_from_f32(0.1875f, 2, 3) == 0x02);  // 1.5 * 0.125 ties to even 0.25
  CHECK(minifloat_sat_from_f32(0.3125f, 3, 2) == 0x05);  // E3M2: 0.3125 = 1.25 * 2^-2
  // MXINT8: k / 64, ties to even, saturated to +-127/64.
  CHECK(mxint8_from_f32(1.0f) == 64);
  CHECK(mxint8_from_f32(-1.0f) == 0xc0);
  CHECK(mxint8_from_f32(3.0f / 128) == 2);  // 1.5 / 64 ties to even 2 / 64
  CHECK(mxint8_from_f32(1.99f) == 127);
  CHECK(mxint8_from_f32(-1.999f) == 0x81);  // -127 / 64, never -2
  CHECK(element_value(ElementKind::int8, 0x81) == -127.0f / 64);
}

TEST_CASE("recipe arith: E8M0 casts, the RCEIL boundaries of torchao's _f32_to_e8m0_rceil",
          "[formats][recipes]") {
  const std::pair<std::uint32_t, int> rceil[] = {
      {0x00000000, 0},   {0x00000001, 0},   {0x00400000, 0},   {0x00400001, 1},   {0x007fffff, 1},
      {0x00800000, 1},   {0x1f800000, 63},  {0x1f800001, 64},  {0x3f7fffff, 127}, {0x3f800000, 127},
      {0x3f800001, 128}, {0x5f800000, 191}, {0x5f800001, 192}, {0x7f000000, 254}, {0x7f000001, 255},
      {0x7f7fffff, 255}, {0x7f800000, 255}, {0x7fc00000, 255}};
  for (const auto& [b, code] : rceil) {
    INFO("binary32 " << std::hex << b);
    CHECK(int(e8m0_from_f32(bits(b), E8m0Cast::rceil)) == code);
  }
  CHECK(e8m0_from_f32(1.5f, E8m0Cast::floor) == 127);
  CHECK(e8m0_from_f32(1.5f, E8m0Cast::ceil) == 128);
  CHECK(e8m0_from_f32(bits(0x00400001), E8m0Cast::ceil) == 1);  // a subnormal with any fraction bit
  CHECK(e8m0_from_f32(bits(0x7f7fffff), E8m0Cast::floor) == 254);
  CHECK(e8m0_value(0) == std::ldexp(1.0f, -127));
  CHECK(std::isnan(e8m0_value(0xff)));
  CHECK(e8m0_reciprocal(254) == std::ldexp(1.0f, -127));
  CHECK(e8m0_reciprocal(0) == std::ldexp(1.0f, 127));
}

namespace {

// One of torchao's MXFP8 semantic blocks: 32 entries, the expected E8M0
// byte and element bytes under FLOOR and under RCEIL.
struct Block {
  const char* name;
  std::vector<float> x;
  int floor_scale, rceil_scale;
  std::vector<int> floor_data, rceil_data;
};

std::vector<float> fill(float v, float first) {
  std::vector<float> x(32, v);
  x[0] = first;
  return x;
}
std::vector<int> bytes(int v, int first) {
  std::vector<int> b(32, v);
  b[0] = first;
  return b;
}

}  // namespace

TEST_CASE("recipe arith: torchao's MXFP8 semantic cases under FLOOR and RCEIL", "[formats][recipes]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float max = std::numeric_limits<float>::max(), sub = bits(1), tiny = bits(0x00800000);
  const Block blocks[] = {
      {"zero", fill(0, 0), 0, 0, bytes(0, 0), bytes(0, 0)},
      {"smallest_normal", fill(tiny, tiny), 0, 0, bytes(0x40, 0x40), bytes(0x40, 0x40)},
      {"mixed_inf", fill(1, inf), 255, 255, bytes(0x7f, 0x7f), bytes(0x7f, 0x7f)},
      {"mixed_nan", fill(1, nan), 255, 255, bytes(0x7f, 0x7f), bytes(0x7f, 0x7f)},
      {"positive_fp8_max", fill(448, 448), 127, 127, bytes(0x7e, 0x7e), bytes(0x7e, 0x7e)},
      {"negative_fp8_max", fill(-448, -448), 127, 127, bytes(0xfe, 0xfe), bytes(0xfe, 0xfe)},
      {"positive_dtype_max", fill(max, max), 246, 247, bytes(0x7e, 0x7e), bytes(0x78, 0x78)},
      {"negative_dtype_max", fill(-max, -max), 246, 247, bytes(0xfe, 0xfe), bytes(0xf8, 0xf8)},
      {"positive_smallest_subnormal", fill(sub, sub), 0, 0, bytes(0, 0), bytes(0, 0)},
      {"negative_smallest_subnormal", fill(-sub, -sub), 0, 0, bytes(0x80, 0x80), bytes(0x80, 0x80)},
      {"mixed_positive_underflow", fill(1, sub), 119, 119, bytes(0x78, 0), bytes(0x78, 0)},
      {"mixed_negative_underflow", fill(1, -sub), 119, 119, bytes(0x78, 0x80), bytes(0x78, 0x80)},
      {"mixed_saturation_and_underflow", fill(1, max), 246, 247, bytes(0, 0x7e), bytes(0, 0x78)},
      {"rceil_premature_bf16_lowers_scale", fill(bits(0x40600001), bits(0x40600001)), 120, 121,
       bytes(0x7e, 0x7e), bytes(0x76, 0x76)},
      {"floor_premature_bf16_raises_scale", fill(bits(0x43ffffff), bits(0x43ffffff)), 127, 128,
       bytes(0x7e, 0x7e), bytes(0x78, 0x78)},
      {"all_nan", fill(nan, nan), 255, 255, bytes(0x7f, 0x7f), bytes(0x7f, 0x7f)},
      {"positive_satfinite", fill(480, 480), 127, 128, bytes(0x7e, 0x7e), bytes(0x77, 0x77)},
      {"negative_satfinite", fill(-480, -480), 127, 128, bytes(0xfe, 0xfe), bytes(0xf7, 0xf7)},
  };
  for (const char* rule : {"floor", "rceil"}) {
    const QuantSpec spec = recipe_spec("torchao-mx", {{"scale_rule", rule}});
    const bool floor = std::string(rule) == "floor";
    for (const Block& b : blocks) {
      INFO(b.name << " under " << rule);
      const Quantized q = quantize(spec, b.x, 1, 32);
      CHECK(int(q.scale_codes.at(0)) == (floor ? b.floor_scale : b.rceil_scale));
      const std::vector<int>& want = floor ? b.floor_data : b.rceil_data;
      for (std::size_t i = 0; i < 32; ++i) CHECK(int(q.codes[i]) == want[i]);
    }
  }
}

TEST_CASE("recipe arith: NVFP4 block scale formulas te-2026-03 and te-2026-02 differ at an E4M3 midpoint",
          "[formats][recipes]") {
  // Tensor amax 1: ges = 2688 and fp32(2688 * fp32(1/6)) = 448 exactly. A
  // block amax of 0x3cadb6db: te-2026-03 fp32(vec_max * 448) = 9.5, the tie
  // between E4M3 9 and 10, to even 10 (0x52); te-2026-02 fp32(fp32(vec_max /
  // 6) * 2688) = 9.499999, to 9 (0x51).
  const Nvfp4TensorScale ts = nvfp4_tensor_scale(1.0f, 448.0f);
  CHECK(ts.encode == 2688.0f);
  const float vec_max = bits(0x3cadb6db);
  CHECK(nvfp4_scale_argument(vec_max, ts.encode, Nvfp4Formula::te_2026_03) == 9.5f);
  CHECK(e4m3fn_from_f32(nvfp4_scale_argument(vec_max, ts.encode, Nvfp4Formula::te_2026_03)) == 0x52);
  CHECK(e4m3fn_from_f32(nvfp4_scale_argument(vec_max, ts.encode, Nvfp4Formula::te_2026_02)) == 0x51);
  // The global scale: clamped at FLT_MAX for a tiny or zero amax, 1 for an
  // infinite one, NaN for NaN.
  CHECK(nvfp4_tensor_scale(1e-37f, 448.0f).encode == std::numeric_limits<float>::max());
  CHECK(nvfp4_tensor_scale(0.0f, 448.0f).encode == std::numeric_limits<float>::max());
  CHECK(nvfp4_tensor_scale(std::numeric_limits<float>::infinity(), 448.0f).encode == 1.0f);
  CHECK(std::isnan(nvfp4_tensor_scale(std::numeric_limits<float>::quiet_NaN(), 448.0f).encode));
  // A zero block scale: the encode scale is FLT_MAX, not infinity.
  CHECK(nvfp4_encode_scale(0.0f, 1.0f) == std::numeric_limits<float>::max());
}

TEST_CASE("recipe arith: TE's FP8 scale from amax (FLT_MAX, power of two, NaN amax 0.5, zero amax 1)",
          "[formats][recipes]") {
  CHECK(te_fp8_scale(1.0f, 448.0f, false).scale == 448.0f);
  CHECK(te_fp8_scale(1.0f, 448.0f, true).scale == 256.0f);
  CHECK(te_fp8_scale(0.0f, 448.0f, true).scale == 1.0f);
  CHECK(te_fp8_scale(1e-38f, 448.0f, false).scale == std::numeric_limits<float>::max());
  CHECK(te_fp8_scale(1e-38f, 448.0f, true).scale == std::ldexp(1.0f, 127));
  const Fp8Scale inf = te_fp8_scale(std::numeric_limits<float>::infinity(), 448.0f, true);
  CHECK(inf.scale == 0.0f);
  CHECK(inf.scale_inv == std::numeric_limits<float>::infinity());
  CHECK(te_fp8_scale(std::numeric_limits<float>::quiet_NaN(), 57344.0f, true).scale == 0.5f);
  CHECK(std::isnan(te_fp8_scale(std::numeric_limits<float>::quiet_NaN(), 57344.0f, false).scale));
}

TEST_CASE("recipe arith: fp8_nearest_value is the value of the c10 cast's code", "[formats][recipes]") {
  // Every 97th binary32 bit pattern, and around every midpoint between two
  // neighbouring E4M3 / E5M2 values (the tie and one ulp either side), both
  // signs: the same bits as element_value(e4m3fn_from_f32(x)), NaN included.
  const auto same = [](float x) {
    const float a = fp8_nearest_value(x, false), b = element_value(ElementKind::e4m3, e4m3fn_from_f32(x));
    const float c = fp8_nearest_value(x, true), d = element_value(ElementKind::e5m2, e5m2_from_f32(x));
    return f32_bits(a) == f32_bits(b) && f32_bits(c) == f32_bits(d);
  };
  std::uint64_t wrong = 0;
  for (std::uint64_t b = 0; b < (1ull << 32); b += 97) wrong += !same(f32_from_bits(std::uint32_t(b)));
  for (const ElementKind k : {ElementKind::e4m3, ElementKind::e5m2})
    for (int code = 0; code < 0x7f; ++code) {
      const float lo = element_value(k, std::uint8_t(code)), hi = element_value(k, std::uint8_t(code + 1));
      if (!is_finite(lo) || !is_finite(hi)) continue;
      const float mid = mul_f32(add_f32(lo, hi), 0.5f);  // exact: both are short binary32 values
      for (const float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), lo, hi})
        wrong += !same(x) + !same(-x);
    }
  for (const float x : {0.0f, -0.0f, 448.0f, 464.0f, 464.5f, 480.0f, 57344.0f, 61439.0f, 61440.0f,
                        std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                        std::numeric_limits<float>::max(), std::numeric_limits<float>::quiet_NaN()})
    wrong += !same(x) + !same(-x);
  CHECK(wrong == 0);
}

TEST_CASE("recipe arith: e2m1_stochastic_value is the value of stochastic_element's code",
          "[formats][recipes]") {
  // Every 251st binary32 bit pattern in [-6, 6] (both signs, subnormals, zeros),
  // each E2M1 value and its binary32 neighbours, with draws at random and on
  // either side of the threshold where the rounding turns (2^k minus the
  // truncated fraction), for draw widths 32 (the default), 8, 1 and 59: the
  // same bits as element_value(stochastic_element(e2m1, ..., a)).
  const FormatDesc e2m1 = rpsim::format("e2m1");
  Rounding rounding;
  rounding.mode = RoundingMode::stochastic;
  std::uint64_t wrong = 0, checked = 0, up = 0;
  for (const int k : {32, 8, 1, 59}) {
    rounding.stochastic_bits = k;
    auto r = rounding_desc(rounding);
    const std::uint64_t one = std::uint64_t(1) << k;
    const auto check = [&](float a, std::uint64_t random) {
      r.random_bits = random;
      const float want = element_value(ElementKind::e2m1, stochastic_element(ElementKind::e2m1, e2m1, r, a));
      const float got = e2m1_stochastic_value(a, random, k);
      wrong += f32_bits(got) != f32_bits(want);
      up += std::fabs(got) > std::fabs(a);
      ++checked;
    };
    std::uint64_t state = 0x9e3779b97f4a7c15ull * std::uint64_t(k);
    const auto one_point = [&](float a) {
      state = mix64(state + 1);
      check(a, state);  // a draw at random (its high bits above k too)
      // The threshold: the fraction of the step below a, truncated to k bits.
      const double m = std::fabs(double(a)), step = m < 2 ? 0.5 : (m < 4 ? 1.0 : 2.0);
      const auto frac = std::uint64_t((m - std::floor(m / step) * step) / step * double(one));
      if (frac != 0) {
        check(a, one - frac);      // reaches 2^k: up
        check(a, one - frac - 1);  // one short: down
      }
    };
    const std::uint32_t six = 0x40c00000u;  // 6.0f
    for (std::uint32_t b = 0; b <= six; b += 251) {
      one_point(f32_from_bits(b));
      one_point(f32_from_bits(b | 0x80000000u));
    }
    for (int code = 0; code < 8; ++code) {
      const float v = element_value(ElementKind::e2m1, std::uint8_t(code));
      for (const float x : {v, std::nextafter(v, 0.0f), std::nextafter(v, 6.0f)})
        if (std::fabs(x) <= 6.0f) {
          one_point(x);
          one_point(-x);
        }
    }
  }
  CHECK(wrong == 0);
  CHECK(checked > 4 * 2 * (0x40c00000u / 251));
  CHECK(up > checked / 8);  // the draws round up often, not never (most patterns are tiny: down)
  CHECK(f32_bits(e2m1_stochastic_value(-0.0f, 0, 32)) == 0x80000000u);
  CHECK(e2m1_stochastic_value(0.25f, (1ull << 31), 32) == 0.5f);      // half a step, a draw of 1/2: up
  CHECK(e2m1_stochastic_value(0.25f, (1ull << 31) - 1, 32) == 0.0f);  // one short: down
  CHECK(e2m1_stochastic_value(-5.0f, (1ull << 31) | (7ull << 40), 32) == -6.0f);  // high bits ignored
}

TEST_CASE("recipe arith: e2m1_ladder_value is the value of TE's ladder code", "[formats][recipes]") {
  // Every 97th binary32 bit pattern, and around every midpoint between two
  // neighbouring E2M1 values (the tie and one ulp either side), both signs,
  // and the ladder's own signs and ends: the same bits as
  // element_value(e2m1_te_ladder(x)).
  const auto same = [](float x) {
    return f32_bits(e2m1_ladder_value(x)) == f32_bits(element_value(ElementKind::e2m1, e2m1_te_ladder(x)));
  };
  std::uint64_t wrong = 0;
  for (std::uint64_t b = 0; b < (1ull << 32); b += 97) wrong += !same(f32_from_bits(std::uint32_t(b)));
  for (int code = 0; code < 7; ++code) {
    const float lo = element_value(ElementKind::e2m1, std::uint8_t(code));
    const float hi = element_value(ElementKind::e2m1, std::uint8_t(code + 1));
    const float mid = mul_f32(add_f32(lo, hi), 0.5f);
    for (const float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), lo, hi})
      wrong += !same(x) + !same(-x);
  }
  for (const float x : {0.0f, 0.25f, 5.0f, 6.0f, 6.5f, 7.0f, std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                        std::numeric_limits<float>::quiet_NaN()})
    wrong += !same(x) + !same(-x);
  CHECK(wrong == 0);
  CHECK(f32_bits(e2m1_ladder_value(-0.25f)) == 0x80000000u);  // [-0.25, 0): -0
  CHECK(f32_bits(e2m1_ladder_value(-0.0f)) == 0u);            // -0.0 and NaN: +0
}
