// The scalar rounding core, one definition for the CPU and the CUDA backend
// (RPSIM_HD, host_device.hpp): the one rounding routine (round_pack: an exact
// sign, significand, exponent and sticky bit to an encoding of any format, in
// every mode, with IEEE flags), decoding (unpack) and what NaNs look like.
// round.cpp, unpack.cpp and nan.cpp are thin wrappers over it; conversions and
// addition are in scalar_convert.hpp. Nothing here allocates or throws.
#pragma once

#include <cstdint>

#include "rpsim/formats/format_desc.hpp"
#include "rpsim/formats/host_device.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

// Rounding (rounding.hpp) as a plain struct: the overflow override is a flag
// and a value instead of a std::optional.
struct RoundingDesc {
  RoundingMode mode = RoundingMode::nearest_even;
  bool flush_subnormal_inputs = false;   // DAZ
  bool flush_subnormal_outputs = false;  // FTZ
  bool overflow_set = false;             // false: the format's own overflow policy
  Overflow overflow = Overflow::infinity;
  NanPolicy nan_policy = NanPolicy::x86_sse;
  int stochastic_bits = 32;
  std::uint64_t random_bits = 0;
};

inline RoundingDesc rounding_desc(const Rounding& r) {
  RoundingDesc d;
  d.mode = r.mode;
  d.flush_subnormal_inputs = r.flush_subnormal_inputs;
  d.flush_subnormal_outputs = r.flush_subnormal_outputs;
  d.overflow_set = r.overflow.has_value();
  d.overflow = r.overflow.value_or(Overflow::infinity);
  d.nan_policy = r.nan_policy;
  d.stochastic_bits = r.stochastic_bits;
  d.random_bits = r.random_bits;
  return d;
}

// The decoded form of an encoding, shared by the operations.
enum class Class : std::uint8_t { zero, finite, infinity, quiet_nan, signaling_nan };

struct Unpacked {
  Class cls = Class::zero;
  bool sign = false;
  std::int64_t exponent = 0;  // value = significand * 2^exponent
  std::uint64_t significand = 0;
  // NaN payload aligned to the top of 64 bits, quiet bit excluded, so that it
  // can move between formats of any width (SoftFloat's "common NaN").
  std::uint64_t payload = 0;

  RPSIM_HD bool is_nan() const { return cls == Class::quiet_nan || cls == Class::signaling_nan; }
};

namespace hd {
RPSIM_HD_ABI_BEGIN

RPSIM_HD_INLINE Overflow overflow_policy(const FormatDesc& fmt, const RoundingDesc& r) {
  return r.overflow_set ? r.overflow : fmt.overflow;
}

// ---- What NaNs look like (SoftFloat keeps this in one specialization folder).

RPSIM_HD_INLINE std::uint64_t quiet_bit(const FormatDesc& fmt) {
  return std::uint64_t(1) << (fmt.man_bits - 1);
}

RPSIM_HD_INLINE std::uint64_t canonical_nan(const FormatDesc& fmt, bool negative) {
  switch (fmt.nan) {
    case NanEncoding::ieee:
      return (negative ? sign_bit(fmt) : 0) | (exp_field_max(fmt) << fmt.man_bits) | quiet_bit(fmt);
    case NanEncoding::all_ones:
      return (negative ? sign_bit(fmt) : 0) | (exp_field_max(fmt) << fmt.man_bits) | man_mask(fmt);
    case NanEncoding::negative_zero: return sign_bit(fmt);
    case NanEncoding::none: break;
  }
  // No NaN in this format (OCP MX FP6/FP4): the value is lost; return +0 and
  // let the caller's invalid flag say so.
  return 0;
}

RPSIM_HD_INLINE std::uint64_t quieted(const FormatDesc& fmt, std::uint64_t bits) {
  return fmt.nan == NanEncoding::ieee ? bits | quiet_bit(fmt) : bits;
}

RPSIM_HD_INLINE std::uint64_t default_nan(const FormatDesc& fmt, NanPolicy policy) {
  return canonical_nan(fmt, policy == NanPolicy::x86_sse);
}

// A NaN of `fmt` carrying the sign and payload of a decoded NaN (conversions).
RPSIM_HD_INLINE std::uint64_t nan_from(const FormatDesc& fmt, const Unpacked& nan, NanPolicy policy) {
  if (policy == NanPolicy::riscv || fmt.nan != NanEncoding::ieee) {
    if (policy == NanPolicy::riscv) return default_nan(fmt, policy);
    return canonical_nan(fmt, nan.sign);
  }
  // Keep the top payload bits, as SoftFloat's common-NaN conversions and
  // hardware do.
  const std::uint64_t man = fmt.man_bits > 1 ? nan.payload >> (64 - (fmt.man_bits - 1)) : 0;
  return (nan.sign ? sign_bit(fmt) : 0) | (exp_field_max(fmt) << fmt.man_bits) | quiet_bit(fmt) | man;
}

// ---- Decoding.

// Two's complement: the word's integer k, value k * 2^-f.
RPSIM_HD_INLINE Unpacked unpack_fixed(const FormatDesc& fmt, std::uint64_t bits) {
  Unpacked u;
  if (bits == 0) return u;
  u.cls = Class::finite;
  u.sign = (bits & sign_bit(fmt)) != 0;
  u.significand = u.sign ? (~bits + 1) & bit_mask(fmt) : bits;  // -2^(w-1): 2^(w-1)
  u.exponent = -std::int64_t(fmt.frac_bits);
  return u;
}

// A NaN's fraction field read the IEEE way whatever the encoding: the top
// fraction bit is the quiet bit, the rest the payload, aligned to bit 63. So
// OCP E4M3's S.1111.111 carries payload 11 and widens as an IEEE NaN with
// those bits would (E4M3 0x7F -> binary32 0x7FF00000, as binary16 0x7E01 ->
// 0x7FC02000); E8M0's 0xFF and the fnuz formats' -0 pattern have no payload
// bits. README "NaN conventions" states the rule.
RPSIM_HD_INLINE Unpacked unpacked_nan(const FormatDesc& fmt, Unpacked u, std::uint64_t man, bool quiet) {
  u.cls = quiet ? Class::quiet_nan : Class::signaling_nan;
  if (fmt.nan != NanEncoding::negative_zero && fmt.man_bits > 1)
    u.payload = (man & (man_mask(fmt) >> 1)) << (64 - (fmt.man_bits - 1));
  return u;
}

RPSIM_HD_INLINE Unpacked unpack(const FormatDesc& fmt, std::uint64_t bits, bool flush_subnormals = false) {
  Unpacked u;
  bits &= bit_mask(fmt);
  if (is_fixed_point(fmt)) return unpack_fixed(fmt, bits);
  const std::uint64_t man = bits & man_mask(fmt);
  const std::uint64_t field = (bits >> fmt.man_bits) & exp_field_max(fmt);
  u.sign = fmt.has_sign && (bits & sign_bit(fmt));
  switch (fmt.nan) {
    case NanEncoding::ieee:
      if (field == exp_field_max(fmt)) {
        if (man == 0) {
          u.cls = Class::infinity;
          return u;
        }
        return unpacked_nan(fmt, u, man, (man >> (fmt.man_bits - 1)) & 1);
      }
      break;
    case NanEncoding::all_ones:
      if (field == exp_field_max(fmt) && man == man_mask(fmt)) return unpacked_nan(fmt, u, man, true);
      break;
    case NanEncoding::negative_zero:
      if (bits == sign_bit(fmt)) {
        u.sign = false;
        return unpacked_nan(fmt, u, man, true);
      }
      break;
    case NanEncoding::none: break;
  }
  if (field == 0 && fmt.has_zero) {
    if (man == 0 || flush_subnormals || !fmt.subnormals) {
      u.cls = Class::zero;
      return u;
    }
    u.cls = Class::finite;
    u.significand = man;
    u.exponent = std::int64_t(fmt.emin) - fmt.man_bits;
    return u;
  }
  u.cls = Class::finite;
  u.significand = man | (std::uint64_t(1) << fmt.man_bits);
  u.exponent = std::int64_t(field) - fmt.bias - fmt.man_bits;
  return u;
}

// ---- Rounding.

// The kept significand after rounding, and whether it was inexact.
struct Decision {
  u128 kept;
  bool inexact;
};

RPSIM_HD_INLINE Decision decide(u128 sig, bool sticky, std::int64_t shift, bool sign,
                                const RoundingDesc& rnd) {
  u128 kept, rem = 0;
  bool half = false, above_half = false, below_half_nonzero = false;
  const int k = rnd.stochastic_bits;
  u128 frac_k = 0;  // the discarded fraction truncated to k bits (stochastic)
  if (shift <= 0) {
    kept = shift <= -128 ? 0 : sig << -shift;  // callers keep shift > -75
    below_half_nonzero = sticky;
  } else if (shift >= 128) {
    kept = 0;
    below_half_nonzero = sig != 0 || sticky;
  } else {
    kept = sig >> shift;
    rem = sig & ((u128(1) << shift) - 1);
    const u128 h = u128(1) << (shift - 1);
    if (rem > h || (rem == h && sticky))
      above_half = true;
    else if (rem == h)
      half = true;
    else
      below_half_nonzero = rem != 0 || sticky;
    if (rnd.mode == RoundingMode::stochastic) frac_k = shift <= k ? rem << (k - shift) : rem >> (shift - k);
  }
  const bool inexact = above_half || half || below_half_nonzero;
  bool up = false;
  switch (rnd.mode) {
    case RoundingMode::nearest_even: up = above_half || (half && (kept & 1)); break;
    case RoundingMode::nearest_away: up = above_half || half; break;
    case RoundingMode::toward_zero: break;
    case RoundingMode::down: up = inexact && sign; break;
    case RoundingMode::up: up = inexact && !sign; break;
    case RoundingMode::odd:
      if (inexact) kept |= 1;
      break;
    case RoundingMode::stochastic: {
      const u128 r = u128(rnd.random_bits & (k >= 64 ? ~0ull : (1ull << k) - 1));
      up = frac_k + r >= (u128(1) << k);
      break;
    }
  }
  return {kept + (up ? 1 : 0), inexact};
}

RPSIM_HD_INLINE bool overflow_goes_to_infinity(RoundingMode mode, bool sign) {
  switch (mode) {
    case RoundingMode::nearest_even:
    case RoundingMode::nearest_away:
    case RoundingMode::stochastic: return true;
    case RoundingMode::up: return !sign;
    case RoundingMode::down: return sign;
    default: return false;
  }
}

// A result beyond the largest finite value: the infinity, the NaN or the
// largest finite value, as the format, the overflow policy and the direction say.
RPSIM_HD_INLINE std::uint64_t overflowed(const FormatDesc& fmt, bool sign, const RoundingDesc& rnd,
                                         Flags& flags) {
  flags |= flag_overflow | flag_inexact;
  Overflow ov = overflow_policy(fmt, rnd);
  if (ov == Overflow::infinity && !has_inf(fmt)) ov = has_nan(fmt) ? Overflow::nan : Overflow::saturate;
  if (ov == Overflow::nan && !has_nan(fmt)) ov = Overflow::saturate;
  if (!overflow_goes_to_infinity(rnd.mode, sign) || ov == Overflow::saturate)
    return max_finite_bits(fmt, sign);
  if (ov == Overflow::infinity) return inf_bits(fmt, sign);
  // A format whose overflow is NaN keeps the sign where its NaN can.
  Unpacked n;
  n.cls = Class::quiet_nan;
  n.sign = sign;
  return nan_from(fmt, n, rnd.nan_policy);
}

// A signed Q format: one grid of spacing 2^-f, two's-complement encoding of
// k in [-2^(w-1), 2^(w-1) - 1], saturation at both ends in every mode (the
// fixed-point hardware of Gupta et al. 2015 saturates; there is no infinity
// to round to), one zero, and underflow raised exactly when a non-zero value
// rounds to 0 (there is no subnormal range to be tiny in).
RPSIM_HD_INLINE std::uint64_t round_pack_fixed(const FormatDesc& fmt, bool sign, std::int64_t exponent,
                                               u128 sig, bool sticky, const RoundingDesc& rnd, Flags& flags) {
  if (sig == 0 && !sticky) return 0;
  if (sig == 0) {  // only sticky: an infinitesimal far below the grid
    sig = 1;
    exponent = -(std::int64_t(1) << 40);
    sticky = false;
  }
  const int word = fmt.bits;
  // |x| >= 2^(w-f) is beyond both ends whatever the rounding; below that,
  // the kept integer has at most w + 1 bits, so decide() shifts safely.
  if (msb_index(sig) + exponent >= word - fmt.frac_bits) {
    flags |= flag_overflow | flag_inexact;
    return max_finite_bits(fmt, sign);
  }
  const Decision d = decide(sig, sticky, -std::int64_t(fmt.frac_bits) - exponent, sign, rnd);
  if (d.inexact) flags |= flag_inexact;
  if (d.kept == 0) {
    if (d.inexact) flags |= flag_underflow;
    return 0;
  }
  const u128 limit = (u128(1) << (word - 1)) - (sign ? 0 : 1);
  if (d.kept > limit) {
    flags |= flag_overflow | flag_inexact;
    return max_finite_bits(fmt, sign);
  }
  const std::uint64_t kk = std::uint64_t(d.kept);
  return (sign ? ~kk + 1 : kk) & bit_mask(fmt);
}

// The exact value (-1)^sign * sig * 2^exponent, with `sticky` standing for
// non-zero bits below sig's last bit, rounded to `fmt`; flags accumulate.
RPSIM_HD_INLINE std::uint64_t round_pack(const FormatDesc& fmt, bool sign, std::int64_t exponent, u128 sig,
                                         bool sticky, const RoundingDesc& rnd, Flags& flags) {
  if (is_fixed_point(fmt)) return round_pack_fixed(fmt, sign, exponent, sig, sticky, rnd, flags);
  const int p = precision(fmt);
  if (!fmt.has_sign && sign && (sig != 0 || sticky)) {
    // An unsigned format (E8M0) has no negative numbers.
    flags |= flag_invalid;
    return default_nan(fmt, rnd.nan_policy);
  }
  if (sig == 0 && !sticky) return fmt.has_zero ? zero_bits(fmt, sign) : 0;
  if (sig == 0) {
    // Only sticky: an infinitesimal; give it a position far below anything.
    sig = 1;
    exponent = -(std::int64_t(1) << 40);  // far below any format's last place
    sticky = false;
  }
  // Keep the significand narrow enough that shifting left stays inside u128.
  int msb = msb_index(sig);
  if (msb > 120) {
    const int drop = msb - 120;
    sticky |= (sig & ((u128(1) << drop) - 1)) != 0;
    sig >>= drop;
    exponent += drop;
    msb = 120;
  }
  const std::int64_t E = msb + exponent;  // exponent of the leading bit
  std::int64_t q;                         // exponent of the last kept bit
  const bool tiny_before = E < fmt.emin;
  if (!tiny_before)
    q = E - (p - 1);
  else if (fmt.subnormals)
    q = std::int64_t(fmt.emin) - (p - 1);
  else
    q = fmt.emin;

  const Decision d = decide(sig, sticky, q - exponent, sign, rnd);
  u128 kept = d.kept;
  if (kept >> p) {  // carry out of the top bit
    kept >>= 1;
    q += 1;
  }
  if (d.inexact) flags |= flag_inexact;

  // Tininess is detected after rounding, as if the exponent were unbounded
  // (IEEE 754-2019 7.5, SoftFloat's default and x86's behaviour).
  bool tiny = false;
  if (tiny_before) {
    tiny = true;
    if (E == fmt.emin - 1) {
      const Decision u = decide(sig, sticky, E - (p - 1) - exponent, sign, rnd);
      if (u.kept >> p) tiny = false;
    }
  }

  if (kept == 0 || (tiny && rnd.flush_subnormal_outputs)) {
    if (tiny && (d.inexact || rnd.flush_subnormal_outputs)) flags |= flag_underflow | flag_inexact;
    if (!fmt.has_zero) return 0;  // E8M0: the smallest value stands in for zero
    return zero_bits(fmt, sign);
  }
  if (tiny && d.inexact) flags |= flag_underflow;

  const int kmsb = msb_index(kept);
  const std::int64_t Er = kmsb + q;
  const u128 sigN = kept << (p - 1 - kmsb);
  if (Er > fmt.emax || (Er == fmt.emax && sigN > fmt.max_significand))
    return overflowed(fmt, sign, rnd, flags);
  const std::uint64_t sbit = sign ? sign_bit(fmt) : 0;
  if (Er < fmt.emin) return sbit | std::uint64_t(kept);  // subnormal: exponent field 0
  const std::uint64_t field = std::uint64_t(Er + fmt.bias);
  return sbit | (field << fmt.man_bits) | (std::uint64_t(sigN) & man_mask(fmt));
}

// The exact value of an encoding as binary64 (every format fits): NaNs as
// the default quiet NaN with the encoding's sign, as round.cpp's to_double.
RPSIM_HD_INLINE double to_double(const FormatDesc& fmt, std::uint64_t bits) {
  const Unpacked u = unpack(fmt, bits);
  switch (u.cls) {
    case Class::zero: return u.sign ? -0.0 : 0.0;
    case Class::infinity: return infinity(u.sign);
    case Class::quiet_nan:
    case Class::signaling_nan: return u.sign ? -quiet_nan() : quiet_nan();
    case Class::finite: break;
  }
  // significand < 2^54 and -1074 <= exponent <= 971 (Format::finalize: every
  // value is a binary64 value), so one product by a power of two is exact.
  const double v = double(u.significand) * exp2_exact(int(u.exponent));
  return u.sign ? -v : v;
}

RPSIM_HD_ABI_END
}  // namespace hd

}  // namespace rpsim
