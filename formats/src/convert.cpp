#include "exact.hpp"
#include "rpsim/formats/convert_paths.hpp"
#include "rpsim/formats/ops.hpp"

namespace rpsim {
namespace {

// A NaN or infinity entering a format that may lack them.
std::uint64_t convert_nonfinite(const Format& to, const Unpacked& u, const Rounding& r, Flags& fl) {
  if (u.is_nan()) {
    if (u.cls == Class::signaling_nan || !to.has_nan()) fl |= flag_invalid;
    return nan_from(to, u, r.nan_policy);
  }
  if (to.has_inf()) return to.inf_bits(u.sign);
  if (!to.has_sign && u.sign) {
    fl |= flag_invalid;
    return default_nan(to, r.nan_policy);
  }
  // No infinity: OCP says saturate or NaN (E4M3 non-saturating); a format
  // without NaN has to saturate.
  if (r.overflow.value_or(to.overflow) == Overflow::saturate || !to.has_nan()) {
    fl |= flag_overflow | flag_inexact;
    return to.max_finite_bits(u.sign);
  }
  fl |= flag_invalid;
  Unpacked n;
  n.cls = Class::quiet_nan;
  n.sign = u.sign;
  return nan_from(to, n, r.nan_policy);
}

// A format whose encodings are read field by field as IEEE 754 reads them.
bool ieee_like(const Format& f) {
  return f.kind == FormatKind::floating && f.has_sign && f.has_zero && f.subnormals &&
         f.nonfinite == NonFinite::ieee && f.nan == NanEncoding::ieee;
}

// round_pack's decision for a significand held in 64 bits, 0 < shift < 64:
// whether to add one unit at the last kept place. Same rule per mode.
bool rounds_up(std::uint64_t kept, std::uint64_t rem, int shift, bool sign, RoundingMode mode) {
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
std::uint64_t overflow_fast(const Format& to, bool sign, const Rounding& r, Flags& fl) {
  fl |= flag_overflow | flag_inexact;
  bool to_inf = r.mode == RoundingMode::nearest_even || r.mode == RoundingMode::nearest_away ||
                (r.mode == RoundingMode::up && !sign) || (r.mode == RoundingMode::down && sign);
  if (r.overflow.value_or(to.overflow) == Overflow::saturate) to_inf = false;
  // IEEE-like: infinity is the all-ones exponent field, the largest finite one encoding below it.
  const std::uint64_t inf = (sign ? to.sign_bit() : 0) | (to.exp_field_max() << to.man_bits);
  return to_inf ? inf : inf - 1;
}

// A destination subnormal (or zero) from a normal input of significand sig
// (implicit bit at bit `man`) whose destination biased exponent te <= 0.
// Tininess is after rounding, as round_pack decides it.
std::uint64_t subnormal_fast(const Format& to, int man, std::uint64_t sig, std::int64_t te, bool sign,
                             const Rounding& r, Flags& fl) {
  const int d = man - to.man_bits;
  const std::int64_t shift = d + 1 - te;
  const std::uint64_t sbit = sign ? to.sign_bit() : 0;
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

}  // namespace

bool convert_fast_applies(const Format& to, const Format& from, const Rounding& r) {
  const Overflow ov = r.overflow.value_or(to.overflow);
  return ieee_like(to) && ieee_like(from) && from.man_bits <= 62 && to.man_bits <= from.man_bits &&
         (ov == Overflow::infinity || ov == Overflow::saturate) && !r.flush_subnormal_outputs &&
         r.mode != RoundingMode::odd && r.mode != RoundingMode::stochastic;
}

namespace {

// convert_fast() with a bool result: an std::optional<uint64_t> returned
// through memory cost a store-forwarding stall (a byte store read back as a
// word), half the fast path's time in perf.
bool try_fast(const Format& to, const Format& from, std::uint64_t bits, const Rounding& r, Flags& fl,
              std::uint64_t& out) {
  const int man = from.man_bits;
  const std::uint64_t field = (bits >> man) & from.exp_field_max();
  if (field == 0 || field == from.exp_field_max() || !convert_fast_applies(to, from, r)) return false;
  const bool sign = (bits >> (from.bits - 1)) & 1;
  const std::uint64_t sig = (bits & from.man_mask()) | (std::uint64_t(1) << man);
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
  out = e >= std::int64_t(to.exp_field_max())
            ? overflow_fast(to, sign, r, fl)
            : (sign ? to.sign_bit() : 0) | (std::uint64_t(e) << to.man_bits) | (kept & to.man_mask());
  return true;
}

}  // namespace

std::optional<std::uint64_t> convert_fast(const Format& to, const Format& from, std::uint64_t bits,
                                          const Rounding& r, Flags& fl) {
  std::uint64_t out = 0;
  if (try_fast(to, from, bits, r, fl, out)) return out;
  return std::nullopt;
}

std::uint64_t convert_general(const Format& to, const Format& from, std::uint64_t bits, const Rounding& r,
                              Flags& fl) {
  const Unpacked u = unpack(from, bits, r.flush_subnormal_inputs);
  if (u.cls == Class::finite) return round_pack(to, u.sign, u.exponent, u.significand, false, r, fl);
  if (u.cls == Class::zero) return round_pack(to, u.sign && to.has_sign, 0, 0, false, r, fl);
  return convert_nonfinite(to, u, r, fl);
}

// The common case (binary64/binary32 to a narrower IEEE-like format, the
// long binary32 test's whole load) costs ~19 ns through unpack + round_pack's
// u128 path; the fast path rounds the significand in one 64-bit word.
std::uint64_t convert(const Format& to, const Format& from, std::uint64_t bits, const Rounding& r,
                      Flags& fl) {
  bits &= from.bit_mask();
  std::uint64_t out;
  if (try_fast(to, from, bits, r, fl, out)) return out;
  return convert_general(to, from, bits, r, fl);
}

}  // namespace rpsim
