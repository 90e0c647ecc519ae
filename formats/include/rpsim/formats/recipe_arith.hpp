// The per-element arithmetic of the block-scaled quantisation recipes
// (recipe.hpp), as the reference implementations compute it: binary32
// operations one at a time, PyTorch's NaN-propagating min / max / clamp, the
// float8 casts of PyTorch's c10, torchao's E8M0 scale rules and bit
// conversions, Transformer Engine's NVFP4 and FP8 scale formulas. Plain
// functions on plain data under RPSIM_HD (host_device.hpp): the CPU loops in
// recipe_quantize.cpp and device-arith (nvcc) compile the same definitions. On the
// device nvcc would contract a * b + c into an FMA: the products and sums
// below go through hd::mul_f32 / add_f32, which are __fmul_rn / __fadd_rn there.
#pragma once

#include <cstdint>

#include "rpsim/formats/host_device.hpp"

namespace rpsim::recipe {
RPSIM_HD_ABI_BEGIN

// ---- binary32 bits and single roundings

// (memcpy, not std::bit_cast: a constexpr host function nvcc will not call
// from device code.)
RPSIM_HD_INLINE std::uint32_t f32_bits(float x) {
  return hd::bits_of(x);
}
RPSIM_HD_INLINE float f32_from_bits(std::uint32_t b) {
  return hd::float_of(b);
}
inline constexpr float kF32Max = 3.40282346638528859811704183484516925e38f;  // FLT_MAX
RPSIM_HD_INLINE float f32_nan() {
  return f32_from_bits(0x7fc00000u);
}
RPSIM_HD_INLINE float f32_inf() {
  return f32_from_bits(0x7f800000u);
}
RPSIM_HD_INLINE bool is_nan(float x) {
  return (f32_bits(x) & 0x7fffffffu) > 0x7f800000u;
}
RPSIM_HD_INLINE bool is_finite(float x) {
  return (f32_bits(x) & 0x7f800000u) != 0x7f800000u;
}
RPSIM_HD_INLINE float abs_f32(float x) {
  return f32_from_bits(f32_bits(x) & 0x7fffffffu);
}
// Single binary32 roundings, never fused (host_device.hpp).
using hd::add_f32;
using hd::div_f32;
using hd::mul_f32;

// torch.minimum / torch.maximum / torch.clamp / torch.amax: a NaN operand
// gives NaN (std::fmin would drop it).
RPSIM_HD_INLINE float nan_min(float a, float b) {
  return is_nan(a) || is_nan(b) ? f32_nan() : (b < a ? b : a);
}
RPSIM_HD_INLINE float nan_max(float a, float b) {
  return is_nan(a) || is_nan(b) ? f32_nan() : (b > a ? b : a);
}
RPSIM_HD_INLINE float nan_clamp(float x, float lo, float hi) {
  const float y = x < lo ? lo : (x > hi ? hi : x);  // (a select: block_operand.cpp's loops vectorise)
  return is_nan(x) ? x : y;
}

// floor(log2 |a|) of a finite non-zero binary32 (subnormals included).
RPSIM_HD_INLINE int f32_ilogb(float a) {
  const std::uint32_t b = f32_bits(a) & 0x7fffffffu;
  if (b >> 23) return int(b >> 23) - 127;
  int top = 22;
  while (top > 0 && !((b >> top) & 1u)) --top;
  return top - 149;
}

// The exponent frexp(x) returns (x = m 2^e, 0.5 <= |m| < 1); 0 for zero and,
// as glibc's frexpf (what torch.frexp ran on the generating CPU), for NaN.
RPSIM_HD_INLINE int f32_frexp_exponent(float x) {
  if (!is_finite(x) || abs_f32(x) == 0.0f) return 0;
  return f32_ilogb(x) + 1;
}

// 2^e as a binary32 for -149 <= e <= 127 (torch.ldexp(1, e)).
RPSIM_HD_INLINE float f32_pow2(int e) {
  return e >= -126 ? f32_from_bits(std::uint32_t(e + 127) << 23) : f32_from_bits(1u << (e + 149));
}

// ---- rounding a binary32 to a narrow grid

// |a| / 2^q rounded to the nearest integer, ties to even (a finite). Capped
// at 2^31 - 1 where the quotient is that large (callers saturate below).
RPSIM_HD_INLINE std::uint32_t rne_multiple(float a, int q) {
  const std::uint32_t b = f32_bits(a) & 0x7fffffffu;
  std::uint32_t sig = b & 0x7fffffu;
  int e2 = -149;  // a = sig 2^e2
  if (b >> 23) {
    sig |= 0x800000u;
    e2 = int(b >> 23) - 150;
  }
  if (sig == 0) return 0;
  if (e2 >= q) return e2 - q >= 8 ? 0x7fffffffu : sig << (e2 - q);
  const int s = q - e2;
  if (s > 25) return 0;  // below half of 2^q (sig < 2^24)
  std::uint32_t n = sig >> s;
  const std::uint32_t rem = sig & ((1u << s) - 1u), half = 1u << (s - 1);
  if (rem > half || (rem == half && (n & 1u))) ++n;
  return n;
}

// The magnitude code (exponent field << mbits | fraction) of |a| rounded to
// nearest even in a binary format with `mbits` fraction bits and `bias`,
// subnormals kept, the exponent unbounded above: codes past the format's
// largest say by how much it overflowed (the caller saturates or gives NaN).
RPSIM_HD_INLINE std::uint32_t minifloat_magnitude(float a, int mbits, int bias) {
  if ((f32_bits(a) & 0x7fffffffu) == 0) return 0;
  const int emin = 1 - bias, e = f32_ilogb(a);
  int q = (e < emin ? emin : e) - mbits;
  std::uint32_t n = rne_multiple(a, q);
  if (n >= (2u << mbits)) {  // rounded up into the next binade
    n >>= 1;
    ++q;
  }
  if (n < (1u << mbits)) return n;  // subnormal (or zero)
  return (std::uint32_t(q + mbits + bias) << mbits) | (n - (1u << mbits));
}

// PyTorch's c10 casts (Float8_e4m3fn.h, Float8_e5m2.h): nearest even; E4M3FN
// gives NaN (0x7f | sign) for NaN, infinity and results above 448, E5M2
// gives infinity above 57344 and 0x7f | sign for NaN. The sign is kept (-0.0
// -> 0x80).
RPSIM_HD_INLINE std::uint8_t e4m3fn_from_f32(float x) {
  const auto sign = std::uint8_t((f32_bits(x) >> 24) & 0x80u);
  if (!is_finite(x)) return sign | 0x7f;
  const std::uint32_t m = minifloat_magnitude(x, 3, 7);
  return sign | std::uint8_t(m > 0x7eu ? 0x7fu : m);
}
RPSIM_HD_INLINE std::uint8_t e5m2_from_f32(float x) {
  const auto sign = std::uint8_t((f32_bits(x) >> 24) & 0x80u);
  if (is_nan(x)) return sign | 0x7f;
  if (!is_finite(x)) return sign | 0x7c;
  const std::uint32_t m = minifloat_magnitude(x, 2, 15);
  return sign | std::uint8_t(m > 0x7bu ? 0x7cu : m);
}

// A finite magnitude's bits `mag` to nearest even on a minifloat's grid of
// mbits fraction bits and least normal exponent emin, as a binary32 value
// (no overflow check): scaled by a power of two to [2^mbits, 2^(mbits+1))
// (below the normals, to a multiple of the subnormal step), rounded to an
// integer by adding and subtracting 1.5 * 2^23 in binary32 (nearest even, the
// default mode: the integer part is below 2^22), scaled back exactly. Shared
// by fp8_nearest_value and e2m1_ladder_value.
RPSIM_HD_INLINE float nearest_magnitude(std::uint32_t mag, int mbits, int emin) {
  int e = int(mag >> 23) - 127;
  e = e < emin ? emin : e;
  const float n =
      add_f32(add_f32(mul_f32(f32_from_bits(mag), f32_pow2(mbits - e)), 12582912.0f), -12582912.0f);
  return mul_f32(n, f32_pow2(e - mbits));
}

// The value of e4m3fn_from_f32(x)'s code (e5m2: e5m2_from_f32's), as
// element_value decodes it, computed without the code for the trainer's MX
// operands in bulk (block_operand.cpp): |x| by nearest_magnitude, the sign
// put back. NaN (x's sign, the canonical payload, as element_value gives it)
// for NaN, and for E4M3FN infinities and results past 448; E5M2 infinity
// past 57344. (tests: against the codes' values.)
RPSIM_HD_INLINE float fp8_nearest_value(float x, bool e5m2) {
  const int mbits = e5m2 ? 2 : 3, emin = e5m2 ? -14 : -6;
  const float max = e5m2 ? 57344.0f : 448.0f;
  const std::uint32_t bits = f32_bits(x), sign = bits & 0x80000000u, mag = bits & 0x7fffffffu;
  const std::uint32_t past = e5m2 ? 0x7f800000u : 0x7fc00000u;  // what overflows to
  // Selects, not branches (block_operand.cpp's loops vectorise): infinity
  // and NaN take the largest finite's path, then their own result.
  const float r = nearest_magnitude(mag < 0x7f800000u ? mag : 0x7f7fffffu, mbits, emin);
  const std::uint32_t special = mag == 0x7f800000u ? past : 0x7fc00000u;
  return f32_from_bits(sign | (mag >= 0x7f800000u ? special : (r > max ? past : f32_bits(r))));
}

// OCP MX's finite-only element formats (E3M2, E2M3, E2M1: sign above
// ebits + mbits bits), nearest even with saturation, the sign kept (-0.0 has
// the sign bit): torchao's _f32_to_floatx_unpacked for every finite and
// infinite input. A NaN has no encoding; torchao turns its bit pattern into
// some code, the checker reads it as don't-care, and here it is +0 (the block
// scale of a NaN block is NaN, so the block still decodes to NaN).
RPSIM_HD_INLINE std::uint8_t minifloat_sat_from_f32(float x, int ebits, int mbits) {
  if (is_nan(x)) return 0;
  const std::uint32_t max_code = (1u << (ebits + mbits)) - 1u;
  const std::uint32_t m = is_finite(x) ? minifloat_magnitude(x, mbits, (1 << (ebits - 1)) - 1) : max_code;
  const std::uint32_t sign = (f32_bits(x) >> 31) << (ebits + mbits);
  return std::uint8_t(sign | (m > max_code ? max_code : m));
}

// MXINT8 (OCP MX v1.0 Sec. 5.3.2): two's complement with an implied scale
// of 2^-6, nearest even, saturated to +-127/64 (the spec clamps normal
// values to the largest magnitude, with sign; -2 = 0x80 is never produced).
// NaN -> 0, as for the FP4/FP6 elements.
RPSIM_HD_INLINE std::uint8_t mxint8_from_f32(float x) {
  if (is_nan(x)) return 0;
  std::uint32_t n = is_finite(x) ? rne_multiple(x, -6) : 127u;
  if (n > 127u) n = 127u;
  return std::uint8_t((f32_bits(x) >> 31) ? (256u - n) & 0xffu : n);
}

// Transformer Engine's cast_to_fp4x2 ladder (reference_nvfp4.py): nearest
// even on the E2M1 grid, saturating, except that -0.0 and NaN give code 0
// (+0: the ladder's first test is x >= 0.0) while values in [-0.25, 0) give
// code 8 (-0).
RPSIM_HD_INLINE std::uint8_t e2m1_te_ladder(float x) {
  if (is_nan(x)) return 0;
  std::uint32_t m = is_finite(x) ? minifloat_magnitude(x, 1, 1) : 7u;
  if (m > 7u) m = 7u;
  return std::uint8_t((x < 0.0f ? 8u : 0u) | m);
}

// The value of e2m1_te_ladder(x)'s code, as element_value decodes it,
// computed without the code for the trainer's NVFP4 operands in bulk
// (block_operand.cpp), as fp8_nearest_value does for FP8: |x| by
// nearest_magnitude (one fraction bit, least normal exponent 0), at most 6;
// the ladder's
// signs: +0 for NaN, +0 and -0, -0 for [-0.25, 0). (tests: against the
// codes' values.)
RPSIM_HD_INLINE float e2m1_ladder_value(float x) {
  // Selects, not branches (block_operand.cpp's loops vectorise): 6 and past
  // it, infinities included, as 6.
  const std::uint32_t mag = f32_bits(x) & 0x7fffffffu;
  const float r = nearest_magnitude(mag < 0x40c00000u ? mag : 0x40c00000u, 1, 0);
  const float v = x < 0.0f ? -r : r;
  return is_nan(x) || x == 0.0f ? 0.0f : v;
}

// Stochastic rounding of `a` onto the E2M1 grid as round_binary64's decide()
// rounds it (scalar_core.hpp): up to the next grid value when the discarded
// fraction of the step, truncated to k bits, plus the low k bits of `random`
// reaches 2^k; the value of the code stochastic_element gives (recipe_block.hpp),
// sign kept (-0 included). `a`: a binary32 value in [-6, 6], not NaN (NVFP4's
// clamped argument, stochastic_argument; a NaN is taken as 0, the caller's
// to handle); 1 <= k <= 59. For the trainer's gradient operands in bulk
// (block_operand.cpp), where the generic rounding cost 45 ns an entry:
// integers, shifts and selects, no branch or division, so that its loop
// vectorises. |a| in steps of 2^(e-1) (E2M1's spacing: 0.5 below 2, the
// subnormal 0.5 included; 1 below 4; 2 to 6) times 2^k is exact in binary64
// and below 2^62; its integer part is the grid value below in its top bits
// and the truncated fraction in its low k. (tests: against stochastic_element.)
RPSIM_HD_INLINE float e2m1_stochastic_value(float a, std::uint64_t random, int k) {
  const std::uint32_t sign = f32_bits(a) & 0x80000000u, mag = f32_bits(a) & 0x7fffffffu;
  const float m = mag > 0x7f800000u ? 0.0f : f32_from_bits(mag);
  const int e = int(m >= 2.0f) + int(m >= 4.0f);
  const auto scaled = std::int64_t(double(m) * double(std::int64_t(1) << (k + 1 - e)));
  const std::int64_t one = std::int64_t(1) << k;
  const std::int64_t up = (scaled & (one - 1)) + std::int64_t(random & std::uint64_t(one - 1)) >= one;
  const float v = float(double((scaled >> k) + up) * double(std::int64_t(1) << e) * 0.5);
  return f32_from_bits(f32_bits(v) | sign);
}

RPSIM_HD_ABI_END
}  // namespace rpsim::recipe
