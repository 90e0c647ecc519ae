// Conversion between formats and addition on encodings, one definition for
// the CPU and the CUDA backend (RPSIM_HD): convert.cpp and add.cpp are thin
// wrappers over it. convert() takes an integer fast path when both formats
// are IEEE-like and the destination no wider (convert_paths.hpp), else
// unpack + round_pack (scalar_core.hpp).
#pragma once

#include <cstdint>

#include "rpsim/formats/scalar_core.hpp"

namespace rpsim {

// An exact intermediate (sign, exponent, significand, sticky) of the
// arithmetic operations.
struct ExactValue {
  bool sign = false;
  std::int64_t exponent = 0;
  u128 significand = 0;  // 0 means an exact zero
  bool sticky = false;
};

namespace hd {
RPSIM_HD_ABI_BEGIN

// The result of an operation with NaN operands (at least one of a, b is NaN;
// both are encodings of `fmt`); raises invalid for a signalling operand.
RPSIM_HD_INLINE std::uint64_t propagate_nan(const FormatDesc& fmt, std::uint64_t a, std::uint64_t b,
                                            NanPolicy policy, Flags& flags) {
  const Unpacked ua = unpack(fmt, a), ub = unpack(fmt, b);
  const bool sa = ua.cls == Class::signaling_nan, sb = ub.cls == Class::signaling_nan;
  if (sa || sb) flags |= flag_invalid;
  switch (policy) {
    case NanPolicy::x86_sse:
      // SoftFloat 8086-SSE s_propagateNaN: a signalling a wins, then the
      // first NaN operand.
      if (sa) return quieted(fmt, a);
      return quieted(fmt, ua.is_nan() ? a : b);
    case NanPolicy::arm:
      if (sa) return quieted(fmt, a);
      if (sb) return quieted(fmt, b);
      return quieted(fmt, ua.is_nan() ? a : b);
    case NanPolicy::riscv: break;
  }
  return default_nan(fmt, policy);
}

// A NaN or infinity entering a format that may lack them.
RPSIM_HD_INLINE std::uint64_t convert_nonfinite(const FormatDesc& to, const Unpacked& u,
                                                const RoundingDesc& r, Flags& fl) {
  if (u.is_nan()) {
    if (u.cls == Class::signaling_nan || !has_nan(to)) fl |= flag_invalid;
    return nan_from(to, u, r.nan_policy);
  }
  if (has_inf(to)) return inf_bits(to, u.sign);
  if (!to.has_sign && u.sign) {
    fl |= flag_invalid;
    return default_nan(to, r.nan_policy);
  }
  // No infinity: OCP says saturate or NaN (E4M3 non-saturating); a format
  // without NaN has to saturate.
  if (overflow_policy(to, r) == Overflow::saturate || !has_nan(to)) {
    fl |= flag_overflow | flag_inexact;
    return max_finite_bits(to, u.sign);
  }
  fl |= flag_invalid;
  Unpacked n;
  n.cls = Class::quiet_nan;
  n.sign = u.sign;
  return nan_from(to, n, r.nan_policy);
}

// A format whose encodings are read field by field as IEEE 754 reads them.
RPSIM_HD_INLINE bool ieee_like(const FormatDesc& f) {
  return f.kind == FormatKind::floating && f.has_sign && f.has_zero && f.subnormals &&
         f.nonfinite == NonFinite::ieee && f.nan == NanEncoding::ieee;
}

// round_pack's decision for a significand held in 64 bits, 0 < shift < 64:
// whether to add one unit at the last kept place. Same rule per mode.
RPSIM_HD_INLINE bool rounds_up(std::uint64_t kept, std::uint64_t rem, int shift, bool sign,
                               RoundingMode mode) {
  const std::uint64_t half = std::uint64_t(1) << (shift - 1);
  switch (mode) {
    case RoundingMode::nearest_even: return rem > half || (rem == half && (kept & 1));
    case RoundingMode::nearest_away: return rem >= half;
    case RoundingMode::down: return rem != 0 && sign;
    case RoundingMode::up: return rem != 0 && !sign;
    default: return false;  // toward zero (odd and stochastic never get here)
  }
}

// The overflowed() branch of round_pack for an IEEE-like destination whose
// policy is infinity or saturate.
RPSIM_HD_INLINE std::uint64_t overflow_fast(const FormatDesc& to, bool sign, const RoundingDesc& r,
                                            Flags& fl) {
  fl |= flag_overflow | flag_inexact;
  bool to_inf = r.mode == RoundingMode::nearest_even || r.mode == RoundingMode::nearest_away ||
                (r.mode == RoundingMode::up && !sign) || (r.mode == RoundingMode::down && sign);
  if (overflow_policy(to, r) == Overflow::saturate) to_inf = false;
  // IEEE-like: infinity is the all-ones exponent field, the largest finite one encoding below it.
  const std::uint64_t inf = (sign ? sign_bit(to) : 0) | (exp_field_max(to) << to.man_bits);
  return to_inf ? inf : inf - 1;
}

// A destination subnormal (or zero) from a normal input of significand sig
// (implicit bit at bit `man`) whose destination biased exponent te <= 0.
// Tininess is after rounding, as round_pack decides it.
RPSIM_HD_INLINE std::uint64_t subnormal_fast(const FormatDesc& to, int man, std::uint64_t sig,
                                             std::int64_t te, bool sign, const RoundingDesc& r, Flags& fl) {
  const int d = man - to.man_bits;
  const std::int64_t shift = d + 1 - te;
  const std::uint64_t sbit = sign ? sign_bit(to) : 0;
  std::uint64_t kept = 0;
  bool inexact = true;    // below half the smallest subnormal: a non-zero rem below half
  if (shift > man + 1) {  // (sig < 2^(man+1) <= 2^(shift-1))
    kept = rounds_up(0, 1, 2, sign, r.mode) ? 1 : 0;
  } else {
    const std::uint64_t rem = sig & ((std::uint64_t(1) << shift) - 1);
    inexact = rem != 0;
    kept = sig >> shift;
    kept += rounds_up(kept, rem, int(shift), sign, r.mode) ? 1 : 0;
  }
  if (!inexact) return sbit | kept;  // exact subnormals raise no underflow (IEEE 754 7.5)
  fl |= flag_inexact;
  bool tiny = true;
  if (te == 0) {  // just below the normal range: does rounding at full precision reach it?
    std::uint64_t k = sig >> d;
    if (d > 0) k += rounds_up(k, sig & ((std::uint64_t(1) << d) - 1), d, sign, r.mode) ? 1 : 0;
    tiny = (k >> (to.man_bits + 1)) == 0;
  }
  if (tiny) fl |= flag_underflow;
  return sbit | kept;  // a carry into bit man_bits is the smallest normal's encoding
}

RPSIM_HD_INLINE bool convert_fast_applies(const FormatDesc& to, const FormatDesc& from,
                                          const RoundingDesc& r) {
  const Overflow ov = overflow_policy(to, r);
  return ieee_like(to) && ieee_like(from) && from.man_bits <= 62 && to.man_bits <= from.man_bits &&
         (ov == Overflow::infinity || ov == Overflow::saturate) && !r.flush_subnormal_outputs &&
         r.mode != RoundingMode::odd && r.mode != RoundingMode::stochastic;
}

// The fast path with a bool result (an optional returned through memory cost
// a store-forwarding stall: half the fast path's time in perf): integer
// rounding of the significand in place for a normal finite input.
RPSIM_HD_INLINE bool try_convert_fast(const FormatDesc& to, const FormatDesc& from, std::uint64_t bits,
                                      const RoundingDesc& r, Flags& fl, std::uint64_t& out) {
  const int man = from.man_bits;
  const std::uint64_t field = (bits >> man) & exp_field_max(from);
  if (field == 0 || field == exp_field_max(from) || !convert_fast_applies(to, from, r)) return false;
  const bool sign = (bits >> (from.bits - 1)) & 1;
  const std::uint64_t sig = (bits & man_mask(from)) | (std::uint64_t(1) << man);
  const std::int64_t te = std::int64_t(field) - from.bias + to.bias;  // destination biased exponent
  if (te <= 0) {
    out = subnormal_fast(to, man, sig, te, sign, r, fl);
    return true;
  }
  const int d = man - to.man_bits;
  std::uint64_t kept = sig >> d;
  std::int64_t e = te;
  if (d > 0) {
    const std::uint64_t rem = sig & ((std::uint64_t(1) << d) - 1);
    if (rem != 0) fl |= flag_inexact;
    if (rounds_up(kept, rem, d, sign, r.mode) && (++kept >> (to.man_bits + 1))) {
      kept >>= 1;  // carry out of the top bit: 2^p becomes 2^(p-1), one binade up
      ++e;
    }
  }
  out = e >= std::int64_t(exp_field_max(to))
            ? overflow_fast(to, sign, r, fl)
            : (sign ? sign_bit(to) : 0) | (std::uint64_t(e) << to.man_bits) | (kept & man_mask(to));
  return true;
}

// unpack() then round_pack(): every format pair, mode and option.
RPSIM_HD_INLINE std::uint64_t convert_general(const FormatDesc& to, const FormatDesc& from,
                                              std::uint64_t bits, const RoundingDesc& r, Flags& fl) {
  const Unpacked u = unpack(from, bits, r.flush_subnormal_inputs);
  if (u.cls == Class::finite) return round_pack(to, u.sign, u.exponent, u.significand, false, r, fl);
  if (u.cls == Class::zero) return round_pack(to, u.sign && to.has_sign, 0, 0, false, r, fl);
  return convert_nonfinite(to, u, r, fl);
}

RPSIM_HD_INLINE std::uint64_t convert(const FormatDesc& to, const FormatDesc& from, std::uint64_t bits,
                                      const RoundingDesc& r, Flags& fl) {
  bits &= bit_mask(from);
  std::uint64_t out;
  if (try_convert_fast(to, from, bits, r, fl, out)) return out;
  return convert_general(to, from, bits, r, fl);
}

// A binary64 value rounded to `fmt` (NaN and infinities included).
RPSIM_HD_INLINE std::uint64_t round_binary64(const FormatDesc& fmt, double value, const RoundingDesc& r,
                                             Flags& fl) {
  return convert(fmt, binary64_desc(), bits_of(value), r, fl);
}
// A binary32 value rounded to `fmt`.
RPSIM_HD_INLINE std::uint64_t round_binary32(const FormatDesc& fmt, float value, const RoundingDesc& r,
                                             Flags& fl) {
  return convert(fmt, binary32_desc(), bits_of(value), r, fl);
}
// An encoding of `fmt` as binary64 bits, NaN payloads kept (convert to
// binary64 to nearest even: exact for every format).
RPSIM_HD_INLINE std::uint64_t widen_to_binary64(const FormatDesc& fmt, std::uint64_t bits) {
  Flags fl = 0;
  return convert(binary64_desc(), fmt, bits, RoundingDesc{}, fl);
}
// The same to binary32, for formats whose values all are binary32 values.
RPSIM_HD_INLINE std::uint32_t widen_to_binary32(const FormatDesc& fmt, std::uint64_t bits) {
  Flags fl = 0;
  return std::uint32_t(convert(binary32_desc(), fmt, bits, RoundingDesc{}, fl));
}

// x + y exactly, except that bits more than ~70 places below the leading bit of
// the larger operand fold into sticky, which cannot change any rounding of a
// format up to binary64. Zero signs follow IEEE 754 6.3.
RPSIM_HD_INLINE ExactValue exact_sum(ExactValue x, ExactValue y, RoundingMode mode) {
  if (x.significand == 0 && y.significand == 0) {
    const bool sign = x.sign == y.sign ? x.sign : mode == RoundingMode::down;
    return {sign, 0, 0, false};
  }
  if (x.significand == 0) return y;
  if (y.significand == 0) return x;
  constexpr int top = 125;  // leaves two bits of headroom for the carry
  const int sx = top - msb_index(x.significand), sy = top - msb_index(y.significand);
  x.significand <<= sx;
  x.exponent -= sx;
  y.significand <<= sy;
  y.exponent -= sy;
  if (y.exponent > x.exponent || (y.exponent == x.exponent && y.significand > x.significand)) {
    const ExactValue t = x;
    x = y;
    y = t;
  }
  const std::int64_t d = x.exponent - y.exponent;
  bool lost = y.sticky;  // bits of y below x's last place
  u128 small;
  if (d >= 128) {
    small = 0;
    lost = true;
  } else {
    small = y.significand >> d;
    if (d > 0 && (y.significand & ((u128(1) << d) - 1)) != 0) lost = true;
  }
  // Callers never pass a sticky larger operand (products and operands are exact).
  ExactValue r{x.sign, x.exponent, 0, lost || x.sticky};
  if (x.sign == y.sign) {
    r.significand = x.significand + small;
  } else {
    // With bits of y lost below, the true difference is one unit less plus a
    // positive fraction: subtract one more and keep sticky.
    r.significand = x.significand - small - (lost ? 1 : 0);
    if (r.significand == 0 && !r.sticky) r.sign = mode == RoundingMode::down;
  }
  return r;
}

// a + b (negate_b: a - b) on encodings of `f`, rounded once.
RPSIM_HD_INLINE std::uint64_t add_signed(const FormatDesc& f, std::uint64_t a, std::uint64_t b, bool negate_b,
                                         const RoundingDesc& r, Flags& fl) {
  const Unpacked x = unpack(f, a, r.flush_subnormal_inputs);
  const Unpacked y = unpack(f, b, r.flush_subnormal_inputs);
  if (x.is_nan() || y.is_nan()) return propagate_nan(f, a, b, r.nan_policy, fl);
  const bool ysign = y.sign != negate_b;
  if (x.cls == Class::infinity || y.cls == Class::infinity) {
    if (x.cls == Class::infinity && y.cls == Class::infinity && x.sign != ysign) {
      fl |= flag_invalid;
      return default_nan(f, r.nan_policy);
    }
    return inf_bits(f, x.cls == Class::infinity ? x.sign : ysign);
  }
  const ExactValue ex{x.sign, x.exponent, x.significand, false};
  const ExactValue ey{ysign, y.exponent, y.significand, false};
  const ExactValue s = exact_sum(ex, ey, r.mode);
  return round_pack(f, s.sign, s.exponent, s.significand, s.sticky, r, fl);
}

// a + b for doubles holding values of `f`, rounded to `f` with `r`: an IEEE
// addition in f (the reductions and accumulators of the GEMM models).
RPSIM_HD_INLINE double add_values(const FormatDesc& f, double a, double b, const RoundingDesc& r) {
  Flags fl = 0;
  const RoundingDesc exact;  // a, b are values of f: encoding them is exact
  const std::uint64_t ab = round_binary64(f, a, exact, fl), bb = round_binary64(f, b, exact, fl);
  return to_double(f, add_signed(f, ab, bb, false, r, fl));
}

RPSIM_HD_ABI_END
}  // namespace hd

}  // namespace rpsim
