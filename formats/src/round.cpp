// The single rounding routine: an exact (sign, significand, exponent, sticky)
// value to an encoding of any format, in any mode, with IEEE flags.
#include <bit>
#include <cmath>
#include <cstring>

#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim {
namespace {

int msb_index(u128 x) {
  std::uint64_t hi = std::uint64_t(x >> 64);
  if (hi) return 127 - std::countl_zero(hi);
  return 63 - std::countl_zero(std::uint64_t(x));
}

// Whether to add one unit in the last kept place.
struct Decision {
  u128 kept;
  bool inexact;
};

Decision decide(u128 sig, bool sticky, std::int64_t shift, bool sign, const Rounding& rnd) {
  u128 kept, rem = 0;
  bool half = false, above_half = false, below_half_nonzero = false;
  int k = rnd.stochastic_bits;
  u128 frac_k = 0;  // the discarded fraction truncated to k bits (stochastic)
  if (shift <= 0) {
    kept = shift <= -128 ? 0 : sig << -shift;  // callers keep shift > -75
    below_half_nonzero = sticky;
  } else if (shift >= 128) {
    kept = 0;
    below_half_nonzero = sig != 0 || sticky;
    rem = 0;
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

bool overflow_goes_to_infinity(RoundingMode mode, bool sign) {
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
std::uint64_t overflowed(const Format& fmt, bool sign, const Rounding& rnd, Flags& flags) {
  flags |= flag_overflow | flag_inexact;
  Overflow ov = rnd.overflow.value_or(fmt.overflow);
  if (ov == Overflow::infinity && !fmt.has_inf()) ov = fmt.has_nan() ? Overflow::nan : Overflow::saturate;
  if (ov == Overflow::nan && !fmt.has_nan()) ov = Overflow::saturate;
  if (!overflow_goes_to_infinity(rnd.mode, sign) || ov == Overflow::saturate)
    return fmt.max_finite_bits(sign);
  if (ov == Overflow::infinity) return fmt.inf_bits(sign);
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
std::uint64_t round_pack_fixed(const Format& fmt, bool sign, std::int64_t exponent, u128 sig, bool sticky,
                               const Rounding& rnd, Flags& flags) {
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
    return fmt.max_finite_bits(sign);
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
    return fmt.max_finite_bits(sign);
  }
  const std::uint64_t k = std::uint64_t(d.kept);
  return (sign ? ~k + 1 : k) & fmt.bit_mask();
}

}  // namespace

std::uint64_t round_pack(const Format& fmt, bool sign, std::int64_t exponent, u128 sig, bool sticky,
                         const Rounding& rnd, Flags& flags) {
  if (fmt.is_fixed_point()) return round_pack_fixed(fmt, sign, exponent, sig, sticky, rnd, flags);
  const int p = fmt.precision();
  if (!fmt.has_sign && sign && (sig != 0 || sticky)) {
    // An unsigned format (E8M0) has no negative numbers.
    flags |= flag_invalid;
    return default_nan(fmt, rnd.nan_policy);
  }
  if (sig == 0 && !sticky) return fmt.has_zero ? fmt.zero_bits(sign) : 0;
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

  Decision d = decide(sig, sticky, q - exponent, sign, rnd);
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
      Decision u = decide(sig, sticky, E - (p - 1) - exponent, sign, rnd);
      if (u.kept >> p) tiny = false;
    }
  }

  if (kept == 0 || (tiny && rnd.flush_subnormal_outputs)) {
    if (tiny && (d.inexact || rnd.flush_subnormal_outputs)) flags |= flag_underflow | flag_inexact;
    if (!fmt.has_zero) return 0;  // E8M0: the smallest value stands in for zero
    return fmt.zero_bits(sign);
  }
  if (tiny && d.inexact) flags |= flag_underflow;

  const int kmsb = msb_index(kept);
  const std::int64_t Er = kmsb + q;
  const u128 sigN = kept << (p - 1 - kmsb);
  if (Er > fmt.emax || (Er == fmt.emax && sigN > fmt.max_significand))
    return overflowed(fmt, sign, rnd, flags);
  const std::uint64_t sbit = sign ? fmt.sign_bit() : 0;
  if (Er < fmt.emin) {  // subnormal: exponent field 0
    return sbit | std::uint64_t(kept);
  }
  const std::uint64_t field = std::uint64_t(Er + fmt.bias);
  return sbit | (field << fmt.man_bits) | (std::uint64_t(sigN) & fmt.man_mask());
}

std::uint64_t round_double(const Format& fmt, double value, const Rounding& rnd, Flags& flags) {
  std::uint64_t bits;
  std::memcpy(&bits, &value, 8);
  return convert(fmt, formats::binary64(), bits, rnd, flags);
}

double to_double(const Format& fmt, std::uint64_t bits) {
  Unpacked u = unpack(fmt, bits);
  switch (u.cls) {
    case Class::zero: return u.sign ? -0.0 : 0.0;
    case Class::infinity: return u.sign ? -HUGE_VAL : HUGE_VAL;
    case Class::quiet_nan:
    case Class::signaling_nan: return u.sign ? -std::nan("") : std::nan("");
    case Class::finite: break;
  }
  const double m = std::ldexp(double(u.significand), int(u.exponent));
  return u.sign ? -m : m;
}

namespace {
// Aliases: the spelled-out enumerator, and SoftFloat's softfloat_round_* /
// TestFloat's -r names.
constexpr RoundingModeInfo kRoundingModes[] = {
    {RoundingMode::nearest_even,
     "rne",
     {"nearest_even", "near_even", ""},
     "round to nearest, ties to even (IEEE 754 roundTiesToEven)"},
    {RoundingMode::nearest_away,
     "rna",
     {"nearest_away", "near_maxMag", ""},
     "round to nearest, ties away from zero (roundTiesToAway)"},
    {RoundingMode::toward_zero, "rtz", {"toward_zero", "minMag", ""}, "toward zero (roundTowardZero)"},
    {RoundingMode::down, "rd", {"down", "min", ""}, "toward -infinity (roundTowardNegative)"},
    {RoundingMode::up, "ru", {"up", "max", ""}, "toward +infinity (roundTowardPositive)"},
    {RoundingMode::odd, "rodd", {"odd", "", ""}, "round to odd (SoftFloat's softfloat_round_odd)"},
    {RoundingMode::stochastic,
     "sr",
     {"stochastic", "", ""},
     "stochastic: k random bits compared with the discarded ones"},
};
}  // namespace

std::span<const RoundingModeInfo> rounding_modes() {
  return kRoundingModes;
}

std::string rounding_names(std::string_view separator, bool deterministic) {
  std::string out;
  for (const auto& r : kRoundingModes) {
    if (deterministic && r.mode == RoundingMode::stochastic) continue;
    if (!out.empty()) out += separator;
    out += r.name;
  }
  return out;
}

RoundingMode parse_rounding(std::string_view name) {
  for (const auto& r : kRoundingModes) {
    if (name == r.name) return r.mode;
    for (const auto a : r.aliases)
      if (!a.empty() && name == a) return r.mode;
  }
  throw FormatError("rounding mode '" + std::string(name) + "': unknown (expected one of " +
                    rounding_names(", ") + ")");
}

std::string_view rounding_name(RoundingMode mode) {
  for (const auto& r : kRoundingModes)
    if (r.mode == mode) return r.name;
  return "?";
}

}  // namespace rpsim
