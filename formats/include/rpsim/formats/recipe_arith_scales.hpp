// The scale rules of the recipes (recipe.hpp), one block's amax in, the
// scale and the element encode scale out, and the decoding of element and
// scale codes: RPSIM_HD functions on plain data (recipe_arith.hpp).
#pragma once

#include <cstdint>

#include "rpsim/formats/recipe_arith.hpp"

// The functions sit in host_device.hpp's inline namespace (nvcc's copy apart
// from the host compiler's, so device-arith compares the two); the types
// between them stay outside it, one type for both.
namespace rpsim::recipe {

// ---- element formats

enum class ElementKind : std::uint8_t { e4m3, e5m2, e3m2, e2m3, e2m1, int8 };

// What a scale rule needs of an element format: the exponent of its largest
// power of two (torchao's target_max_pow2; MXINT8: 0, OCP MX Table 1), its
// fraction bits and its largest magnitude.
struct ElementInfo {
  int emax;
  int mbits;
  float max;
};
RPSIM_HD_ABI_BEGIN

RPSIM_HD_INLINE ElementInfo element_info(ElementKind k) {
  switch (k) {
    case ElementKind::e4m3: return {8, 3, 448.0f};
    case ElementKind::e5m2: return {15, 2, 57344.0f};
    case ElementKind::e3m2: return {4, 2, 28.0f};
    case ElementKind::e2m3: return {2, 3, 7.5f};
    case ElementKind::e2m1: return {2, 1, 6.0f};
    case ElementKind::int8: break;
  }
  return {0, 6, 1.984375f};
}

RPSIM_HD_INLINE bool is_fp8(ElementKind k) {
  return k == ElementKind::e4m3 || k == ElementKind::e5m2;
}

// The element code of a binary32 already scaled into the element's range:
// the c10 casts for E4M3 / E5M2 (NaN for results past the range), torchao's
// saturating conversions for the FP6 / FP4 formats, MXINT8's fixed point.
RPSIM_HD_INLINE std::uint8_t encode_element(ElementKind k, float v) {
  switch (k) {
    case ElementKind::e4m3: return e4m3fn_from_f32(v);
    case ElementKind::e5m2: return e5m2_from_f32(v);
    case ElementKind::e3m2: return minifloat_sat_from_f32(v, 3, 2);
    case ElementKind::e2m3: return minifloat_sat_from_f32(v, 2, 3);
    case ElementKind::e2m1: return minifloat_sat_from_f32(v, 2, 1);
    case ElementKind::int8: break;
  }
  return mxint8_from_f32(v);
}

// The value of a code of a binary format (sign above ebits + mbits bits);
// `nan_all_ones`: the all-ones magnitude is NaN (E4M3FN), `ieee`: the top
// exponent is infinity / NaN (E5M2).
RPSIM_HD_INLINE float minifloat_value(std::uint32_t code, int ebits, int mbits, bool nan_all_ones,
                                      bool ieee) {
  const std::uint32_t mag = code & ((1u << (ebits + mbits)) - 1u), field = mag >> mbits;
  const std::uint32_t frac = mag & ((1u << mbits) - 1u);
  const bool negative = (code >> (ebits + mbits)) & 1u;
  const int bias = (1 << (ebits - 1)) - 1;
  float v;
  if (nan_all_ones && mag == (1u << (ebits + mbits)) - 1u) {
    v = f32_nan();
  } else if (ieee && field == (1u << ebits) - 1u) {
    v = frac ? f32_nan() : f32_inf();
  } else if (field == 0) {
    v = mul_f32(float(frac), f32_pow2(1 - bias - mbits));
  } else {
    v = mul_f32(float(frac + (1u << mbits)), f32_pow2(int(field) - bias - mbits));
  }
  return negative ? -v : v;
}

RPSIM_HD_INLINE float element_value(ElementKind k, std::uint8_t code) {
  switch (k) {
    case ElementKind::e4m3: return minifloat_value(code, 4, 3, true, false);
    case ElementKind::e5m2: return minifloat_value(code, 5, 2, false, true);
    case ElementKind::e3m2: return minifloat_value(code, 3, 2, false, false);
    case ElementKind::e2m3: return minifloat_value(code, 2, 3, false, false);
    case ElementKind::e2m1: return minifloat_value(code, 2, 1, false, false);
    case ElementKind::int8: break;
  }
  return mul_f32(float(std::int8_t(code)), 0.015625f);
}

// ---- E8M0 (OCP MX scale: 2^(code - 127), 0xff NaN)

// 2^(code - 127) (code 0: the binary32 subnormal 2^-127), NaN for 0xff.
RPSIM_HD_INLINE float e8m0_value(std::uint8_t code) {
  return code == 0xff ? f32_nan() : f32_pow2(int(code) - 127);
}

// torchao's _e8m0_scale_to_reciprocal_fp32: 2^(127 - code) built from bits
// (code 254 -> the subnormal 2^-127; 0xff -> NaN 0x7f800001).
RPSIM_HD_INLINE float e8m0_reciprocal(std::uint8_t code) {
  const auto r = std::uint8_t(254u - code);
  if (r == 0) return f32_from_bits(0x00400000u);
  if (r == 255) return f32_from_bits(0x7f800001u);
  return f32_from_bits(std::uint32_t(r) << 23);
}

RPSIM_HD_ABI_END
// The E8M0 casts of a binary32 on their own (0xff for NaN and infinity):
// floor keeps the exponent field (the binary32 subnormals, and zero, give
// code 0: OCP MX's floor(log2 x), clamped); ceil adds one where any fraction
// bit is set (torchao CEIL); rceil is cvt.rp.ue8m0 as torchao's
// _f32_to_e8m0_rceil computes it (a subnormal rounds up only past 2^-127;
// code 254 rounded up gives 0xff).
enum class E8m0Cast : std::uint8_t { floor, ceil, rceil };
RPSIM_HD_ABI_BEGIN

RPSIM_HD_INLINE std::uint8_t e8m0_from_f32(float v, E8m0Cast cast) {
  if (!is_finite(v)) return 0xff;
  const std::uint32_t b = f32_bits(v), field = (b >> 23) & 0xffu, frac = b & 0x7fffffu;
  std::uint32_t up = 0;
  if (cast == E8m0Cast::ceil) up = frac != 0;
  if (cast == E8m0Cast::rceil) up = field == 0 ? frac > 0x400000u : frac != 0;
  const std::uint32_t code = field + up;
  return std::uint8_t(code > 0xffu ? 0xffu : code);
}

// ---- MX (torchao to_mx, OCP MX v1.0 Sec. 6.3)

RPSIM_HD_ABI_END
enum class MxScaleRule : std::uint8_t { floor, ceil, even, rceil };
RPSIM_HD_ABI_BEGIN

// The E8M0 scale code of a block whose amax is `amax` (NaN if any entry is):
// FLOOR 2^(exponent(amax) - emax), CEIL one more where amax is not a power
// of two, EVEN amax first rounded to the element's fraction bits (an amax
// that rounds to infinity gives 0xff, as in torchao), each clamped to
// [-127, 128] and 0xff for a non-finite amax; RCEIL the cvt.rp cast of
// fp32(amax * fp32(1 / max)).
RPSIM_HD_INLINE std::uint8_t mx_scale_code(float amax, MxScaleRule rule, ElementInfo e) {
  if (rule == MxScaleRule::rceil) return e8m0_from_f32(mul_f32(amax, div_f32(1.0f, e.max)), E8m0Cast::rceil);
  std::uint32_t b = f32_bits(amax);
  if (rule == MxScaleRule::even && !is_nan(amax)) b = (b + (1u << (22 - e.mbits))) & 0xff800000u;
  int pow2 = int((b >> 23) & 0xffu) - 127;
  if (rule == MxScaleRule::ceil && (b & 0x7fffffu)) ++pow2;
  int exponent = pow2 - e.emax;
  exponent = exponent < -127 ? -127 : (exponent > 128 ? 128 : exponent);
  return is_finite(f32_from_bits(b)) ? std::uint8_t(exponent + 127) : std::uint8_t(0xff);
}

// One element of an MX block: fp32(x * 2^-scale), clamped to +-max first for
// E4M3 / E5M2 under FLOOR, CEIL and EVEN (torchao's eager path before
// PyTorch 2.13; RCEIL casts without it), then the element cast.
RPSIM_HD_INLINE std::uint8_t mx_element(float x, std::uint8_t scale_code, MxScaleRule rule, ElementKind k) {
  float v = mul_f32(x, e8m0_reciprocal(scale_code));
  if (is_fp8(k) && rule != MxScaleRule::rceil) {
    const float max = element_info(k).max;
    v = nan_clamp(v, -max, max);
  }
  return encode_element(k, v);
}

// ---- NVFP4 (Transformer Engine reference_nvfp4.py)

RPSIM_HD_ABI_END
// The block decode-scale formula: te_2026_03, TE since commit 523801d
// (2026-03-16): fp32(vec_max * fp32(ges * fp32(1/6))); te_2026_02, before
// it: fp32(fp32(vec_max / 6) * ges).
enum class Nvfp4Formula : std::uint8_t { te_2026_03, te_2026_02 };

struct Nvfp4TensorScale {
  float encode;  // ges = min(fp32(6 E / amax), FLT_MAX), 1 where that is 0
  float decode;  // gds = fp32(1 / ges)
};
RPSIM_HD_ABI_BEGIN

// E: the E4M3 maximum the global scale assumes (448; 256 under 4over6's
// nvfp4_e4m3_max). A NaN amax gives NaN scales; an infinite one ges = 1; a
// zero one ges = FLT_MAX (6 E / 0 is clamped; TE's `== 0` guard never fires).
RPSIM_HD_INLINE Nvfp4TensorScale nvfp4_tensor_scale(float amax, float e4m3_max) {
  float ges = nan_min(div_f32(mul_f32(e4m3_max, 6.0f), amax), kF32Max);
  if (ges == 0.0f) ges = 1.0f;
  return {ges, div_f32(1.0f, ges)};
}

// The argument of a block's E4M3 decode scale, clamped to +-448 (NaN kept).
RPSIM_HD_INLINE float nvfp4_scale_argument(float vec_max, float ges, Nvfp4Formula f) {
  const float d = f == Nvfp4Formula::te_2026_03 ? mul_f32(vec_max, mul_f32(ges, div_f32(1.0f, 6.0f)))
                                                : mul_f32(div_f32(vec_max, 6.0f), ges);
  return nan_clamp(nan_min(d, kF32Max), -448.0f, 448.0f);
}

// The element encode scale of a block with E4M3 scale `scale`:
// min(fp32(1 / fp32(scale * gds)), FLT_MAX) (a zero scale gives FLT_MAX).
RPSIM_HD_INLINE float nvfp4_encode_scale(float scale, float gds) {
  return nan_min(div_f32(1.0f, mul_f32(scale, gds)), kF32Max);
}

// An NVFP4 element: TE's ladder on clamp(fp32(x * enc), -6, 6).
RPSIM_HD_INLINE std::uint8_t nvfp4_element(float x, float enc) {
  return e2m1_te_ladder(nan_clamp(mul_f32(x, enc), -6.0f, 6.0f));
}

// 4over6's two E4M3 scales from base = fp32(fp32(vec_max / 6) * ges) (the
// older order, still used there at d0067d0): map-to-6 E4M3(base), map-to-4
// E4M3(fp32(base * 1.5)), each clamped to +-448 first.
RPSIM_HD_INLINE std::uint8_t nvfp4_4over6_scale(float vec_max, float ges, bool map4) {
  float base = mul_f32(div_f32(vec_max, 6.0f), ges);
  if (map4) base = mul_f32(base, 1.5f);
  return e4m3fn_from_f32(nan_clamp(base, -448.0f, 448.0f));
}

// One element's term of 4over6's error. Exact path: the decoded value
// fp32(fp32(fp32(q * s) * amax) / fp32(6 E)) minus x. Fast-math path
// (`fast`): the kernel's FP16 product q * s (exact for every finite E4M3
// scale; the reference decodes the FP16 NaN an all-ones scale gives as 98304)
// minus fp32(x * ges). |diff| (MAE) or diff^2 (MSE), in binary32.
RPSIM_HD_INLINE float nvfp4_4over6_term(float q, std::uint8_t scale_code, float amax, float e4m3_max, float x,
                                        float ges, bool fast, bool mse) {
  const float s = minifloat_value(scale_code, 4, 3, true, false);
  float diff;
  if (fast) {
    const float candidate = (scale_code & 0x7fu) == 0x7fu ? 98304.0f : mul_f32(q, s);
    diff = add_f32(candidate, -mul_f32(x, ges));
  } else {
    diff = add_f32(div_f32(mul_f32(mul_f32(q, s), amax), mul_f32(6.0f, e4m3_max)), -x);
  }
  return mse ? mul_f32(diff, diff) : abs_f32(diff);
}

// ---- FP8 block and per-tensor current scaling (TE quantize_scale_calc.py)

RPSIM_HD_ABI_END
struct Fp8Scale {
  float scale;      // the encode multiplier
  float scale_inv;  // fp32(1 / scale): what the reference returns
};
RPSIM_HD_ABI_BEGIN

// scale = fp32(max / amax), FLT_MAX where that is infinite; pow2: 2^(frexp
// exponent - 1) of it, 0 where amax is infinite (a NaN amax gives 0.5: frexp
// of NaN has exponent 0); 1 where amax is 0.
RPSIM_HD_INLINE Fp8Scale te_fp8_scale(float amax, float max, bool pow2) {
  const float a = nan_max(amax, 0.0f);  // torch.max(amax, eps), eps = 0
  float scale = div_f32(max, a);
  if (scale == f32_inf()) scale = kF32Max;
  if (pow2) {
    scale = f32_pow2(f32_frexp_exponent(scale) - 1);
    if (a == f32_inf()) scale = 0.0f;
  }
  if (a == 0.0f) scale = 1.0f;
  return {scale, div_f32(1.0f, scale)};
}

// An FP8 element: cast(fp32(x * scale)), clamped to +-max first where the
// reference clamps (the block reference does, the per-tensor one does not).
RPSIM_HD_INLINE std::uint8_t fp8_element(float x, float scale, ElementKind k, bool clamp) {
  float v = mul_f32(x, scale);
  if (clamp) v = nan_clamp(v, -element_info(k).max, element_info(k).max);
  return encode_element(k, v);
}

RPSIM_HD_ABI_END
}  // namespace rpsim::recipe
