// An independent reference for rpsim's formats core, built on MPFR.
//
// Nothing here calls rpsim's decoding, rounding or NaN code: encodings are
// decoded from the Format's fields, values are rounded by MPFR (exponent range
// emulated with mpfr_set_emin + mpfr_check_range + mpfr_subnormalize, as the
// MPFR manual does for IEEE binary64), and results are encoded here again.
// Round-to-nearest-away and round-to-odd are not MPFR modes; they are built
// from the two neighbours that MPFR's toward-zero and away-from-zero roundings
// give. Arithmetic is computed by MPFR with round-to-odd at a precision of at
// least p + 2 bits, which makes any later rounding to p bits correct
// (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved
// algorithms using rounding to odd", IEEE TC 2008).
//
// Semantics that IEEE 754 leaves to the platform follow the x86 SSE
// convention that SoftFloat's 8086-SSE specialization encodes: tininess after
// rounding, the default NaN has its sign set, the first NaN operand is
// returned quieted. Semantics of the non-IEEE formats are written out below
// where they are decided (overflow, NaN, infinities entering a format that has
// none).
#pragma once

#include <mpfr.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::oracle {

// An MPFR number that frees itself.
class Real {
 public:
  explicit Real(mpfr_prec_t precision = 64) { mpfr_init2(v_, precision); }
  ~Real() { mpfr_clear(v_); }
  Real(const Real&) = delete;
  Real& operator=(const Real&) = delete;
  mpfr_ptr get() { return v_; }
  mpfr_srcptr get() const { return v_; }
  operator mpfr_ptr() { return v_; }
  operator mpfr_srcptr() const { return v_; }

 private:
  mpfr_t v_;
};

struct Expected {
  std::uint64_t bits = 0;
  Flags flags = 0;
};

struct Options {
  bool flush_subnormal_inputs = false;   // DAZ: a subnormal operand reads as a signed zero
  bool flush_subnormal_outputs = false;  // FTZ: a tiny result becomes a signed zero
  std::optional<Overflow> overflow;      // unset: the format's own
};

enum class Kind { zero, finite, infinity, quiet_nan, signaling_nan };

// value = (-1)^sign * significand * 2^exponent
struct Decoded {
  Kind kind = Kind::zero;
  bool sign = false;
  std::uint64_t significand = 0;
  int exponent = 0;
  bool is_nan() const { return kind == Kind::quiet_nan || kind == Kind::signaling_nan; }
};

// ---------------------------------------------------------------------------
// Encoding and decoding, from the descriptor fields alone.

inline std::uint64_t field_max(const Format& f) {
  return (std::uint64_t(1) << f.exp_bits) - 1;
}
inline std::uint64_t fraction_mask(const Format& f) {
  return (std::uint64_t(1) << f.man_bits) - 1;
}
inline int width(const Format& f) {
  return int(f.has_sign) + f.exp_bits + f.man_bits;
}
inline std::uint64_t sign_mask(const Format& f) {
  return f.has_sign ? std::uint64_t(1) << (width(f) - 1) : 0;
}
// Exponent of the smallest normal: field 1, or field 0 when 0 is not zero (E8M0).
inline int smallest_normal_exponent(const Format& f) {
  return (f.has_zero ? 1 : 0) - f.bias;
}

inline Decoded decode(const Format& f, std::uint64_t bits, bool flush_subnormals = false) {
  Decoded d;
  const std::uint64_t mask = width(f) >= 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << width(f)) - 1;
  bits &= mask;
  const std::uint64_t fraction = bits & fraction_mask(f);
  const std::uint64_t field = (bits >> f.man_bits) & field_max(f);
  d.sign = f.has_sign && (bits & sign_mask(f)) != 0;
  switch (f.nan) {
    case NanEncoding::ieee:
      if (field == field_max(f)) {
        if (fraction == 0)
          d.kind = Kind::infinity;
        else
          d.kind = (fraction >> (f.man_bits - 1)) & 1 ? Kind::quiet_nan : Kind::signaling_nan;
        return d;
      }
      break;
    case NanEncoding::all_ones:
      if (field == field_max(f) && fraction == fraction_mask(f)) {
        d.kind = Kind::quiet_nan;
        return d;
      }
      break;
    case NanEncoding::negative_zero:
      // The pattern of -0 is the only NaN; it carries no sign.
      if (bits == sign_mask(f)) {
        d.kind = Kind::quiet_nan;
        d.sign = false;
        return d;
      }
      break;
    case NanEncoding::none: break;
  }
  if (field == 0 && f.has_zero) {
    if (fraction == 0 || !f.subnormals || flush_subnormals) {  // without subnormals they read as zero
      d.kind = Kind::zero;
      return d;
    }
    d.kind = Kind::finite;
    d.significand = fraction;
    d.exponent = smallest_normal_exponent(f) - f.man_bits;
    return d;
  }
  d.kind = Kind::finite;
  d.significand = fraction | (std::uint64_t(1) << f.man_bits);
  d.exponent = int(field) - f.bias - f.man_bits;
  return d;
}

inline std::uint64_t zero_encoding(const Format& f, bool negative) {
  if (!f.has_zero) return 0;  // E8M0 has no zero: its smallest value 2^-127 stands in
  if (f.nan == NanEncoding::negative_zero || !f.has_sign) return 0;
  return negative ? sign_mask(f) : 0;
}

inline std::uint64_t infinity_encoding(const Format& f, bool negative) {
  return (negative ? sign_mask(f) : 0) | field_max(f) << f.man_bits;
}

// The NaN a format produces for a result that carries a sign (overflow to NaN,
// an infinity or a NaN entering a non-IEEE format). A format without NaN
// has nothing to give: +0, with the invalid flag saying the value is lost.
inline std::uint64_t nan_encoding(const Format& f, bool negative) {
  const std::uint64_t s = negative ? sign_mask(f) : 0;
  switch (f.nan) {
    case NanEncoding::ieee: return s | field_max(f) << f.man_bits | std::uint64_t(1) << (f.man_bits - 1);
    case NanEncoding::all_ones: return s | field_max(f) << f.man_bits | fraction_mask(f);
    case NanEncoding::negative_zero: return sign_mask(f);
    case NanEncoding::none: return 0;
  }
  return 0;
}

// x86 SSE: the default NaN has the sign bit set.
inline std::uint64_t default_nan(const Format& f) {
  return nan_encoding(f, true);
}

inline std::uint64_t max_finite_encoding(const Format& f, bool negative) {
  std::uint64_t field = field_max(f), fraction = fraction_mask(f);
  switch (f.nonfinite) {
    case NonFinite::ieee: field -= 1; break;
    case NonFinite::nan_only:
      if (f.nan == NanEncoding::all_ones) {
        if (f.man_bits == 0)
          field -= 1;  // E8M0: 0xFF is NaN
        else
          fraction -= 1;  // S.1111.111 is NaN
      }
      break;
    case NonFinite::finite_only: break;
  }
  return (negative ? sign_mask(f) : 0) | field << f.man_bits | fraction;
}

// Sets `out` (precision >= 64) to the exact value of a finite or zero encoding.
inline void set_exact(mpfr_ptr out, const Decoded& d) {
  if (d.kind != Kind::zero && d.kind != Kind::finite) throw std::logic_error("oracle: not a finite value");
  if (d.kind == Kind::zero) {
    mpfr_set_zero(out, d.sign ? -1 : 1);
    return;
  }
  mpfr_set_ui_2exp(out, d.significand, d.exponent, MPFR_RNDN);
  if (d.sign) mpfr_neg(out, out, MPFR_RNDN);
}

// ---------------------------------------------------------------------------
// Rounding an exact value onto the format's grid.

namespace detail {

enum class Range { unbounded, format };

// MPFR's own modes; with Range::format the exponent range is the format's:
// MPFR's emin is one above the exponent of the last subnormal place (MPFR
// writes values as 0.1xxx * 2^e), or, without subnormals, one above the
// smallest normal's exponent so that the only values below 2^emin are 0.
inline bool round_native(mpfr_ptr out, mpfr_srcptr x, const Format& f, Range range, mpfr_rnd_t rnd) {
  int t = mpfr_set(out, x, rnd);
  if (range == Range::format) {
    const mpfr_exp_t saved = mpfr_get_emin();
    const int emin = smallest_normal_exponent(f);
    const bool subnormals = f.subnormals && f.has_zero;
    mpfr_set_emin(subnormals ? emin - f.man_bits + 1 : emin + 1);
    t = mpfr_check_range(out, t, rnd);
    if (subnormals) t = mpfr_subnormalize(out, t, rnd);
    mpfr_set_emin(saved);
  }
  return t != 0;
}

// Whether the integral significand of a grid value is odd: its lowest set bit
// sits on the grid's last place.
inline bool odd_on_grid(mpfr_srcptr v, const Format& f, Range range) {
  if (mpfr_zero_p(v)) return false;
  const int emin = smallest_normal_exponent(f);
  const long lead = long(mpfr_get_exp(v)) - 1;
  const long last_place =
      (range == Range::format && f.subnormals && f.has_zero && lead < emin ? emin : lead) - f.man_bits;
  mpz_t z;
  mpz_init(z);
  const long e = long(mpfr_get_z_2exp(z, v));
  const long lowest = e + long(mpz_scan1(z, 0));
  mpz_clear(z);
  return lowest == last_place;
}

// Rounds x onto the grid of f (precision p, unbounded or the format's exponent
// range) in any deterministic mode; returns whether the result is inexact.
inline bool round_on_grid(mpfr_ptr out, mpfr_srcptr x, const Format& f, Range range, RoundingMode mode) {
  switch (mode) {
    case RoundingMode::nearest_even: return round_native(out, x, f, range, MPFR_RNDN);
    case RoundingMode::toward_zero: return round_native(out, x, f, range, MPFR_RNDZ);
    case RoundingMode::down: return round_native(out, x, f, range, MPFR_RNDD);
    case RoundingMode::up: return round_native(out, x, f, range, MPFR_RNDU);
    case RoundingMode::nearest_away:
    case RoundingMode::odd: {
      if (!round_native(out, x, f, range, MPFR_RNDZ)) return false;
      Real away(mpfr_get_prec(out));
      round_native(away, x, f, range, MPFR_RNDA);
      bool take_away;
      if (mode == RoundingMode::odd) {
        take_away = !odd_on_grid(out, f, range);
      } else {
        Real midpoint(2 * mpfr_get_prec(out) + 8);
        mpfr_add(midpoint, out, away, MPFR_RNDN);  // exact: neighbours
        mpfr_div_2ui(midpoint, midpoint, 1, MPFR_RNDN);
        take_away = mpfr_cmpabs(x, midpoint) >= 0;
      }
      if (take_away) mpfr_set(out, away, MPFR_RNDN);
      return true;
    }
    case RoundingMode::stochastic: break;
  }
  throw std::invalid_argument("oracle: stochastic rounding has no single expected result");
}

// Encodes a nonzero grid value no larger than the largest finite.
inline std::uint64_t encode_finite(const Format& f, mpfr_srcptr v) {
  const bool negative = mpfr_signbit(v) != 0;
  const int emin = smallest_normal_exponent(f);
  const long lead = long(mpfr_get_exp(v)) - 1;
  const bool subnormal = f.has_zero && lead < emin;
  const long last_place = (subnormal ? emin : lead) - f.man_bits;
  Real scaled(mpfr_get_prec(v) + 2);
  mpfr_mul_2si(scaled, v, -last_place, MPFR_RNDN);
  mpfr_abs(scaled, scaled, MPFR_RNDN);
  if (!mpfr_integer_p(scaled)) throw std::logic_error("oracle: value not on the grid");
  const std::uint64_t integral = mpfr_get_ui(scaled, MPFR_RNDN);
  const std::uint64_t field = subnormal ? 0 : std::uint64_t(lead + f.bias);
  const std::uint64_t fraction = integral & fraction_mask(f);
  return (negative ? sign_mask(f) : 0) | field << f.man_bits | fraction;
}

inline bool overflow_goes_to_infinity(RoundingMode mode, bool negative) {
  switch (mode) {
    case RoundingMode::nearest_even:
    case RoundingMode::nearest_away: return true;
    case RoundingMode::up: return !negative;
    case RoundingMode::down: return negative;
    default: return false;  // toward zero; round to odd stays finite, as SoftFloat's round_odd
  }
}

inline Overflow effective_overflow(const Format& f, const Options& opt) {
  Overflow ov = opt.overflow.value_or(f.overflow);
  if (ov == Overflow::infinity && f.nonfinite != NonFinite::ieee)
    ov = f.nan != NanEncoding::none ? Overflow::nan : Overflow::saturate;
  if (ov == Overflow::nan && f.nan == NanEncoding::none) ov = Overflow::saturate;
  return ov;
}

}  // namespace detail

// Rounds an exact finite value (or a signed zero) to `f`: bits and IEEE flags.
// Overflow: the value rounded to p bits with an unbounded exponent exceeds
// the largest finite. Tininess: that same value lies below 2^emin (after
// rounding, as x86). Underflow: tiny and inexact (or flushed).
inline Expected round_exact(const Format& f, mpfr_srcptr x, RoundingMode mode, const Options& opt = {}) {
  const bool negative = mpfr_signbit(x) != 0;
  if (mpfr_zero_p(x)) return {zero_encoding(f, negative), 0};
  if (!f.has_sign && negative) return {default_nan(f), flag_invalid};  // E8M0 has no negatives
  const mpfr_prec_t p = f.man_bits + 1;
  Real unbounded(p);
  const bool inexact = detail::round_on_grid(unbounded, x, f, detail::Range::unbounded, mode);
  Real largest(p);
  set_exact(largest, decode(f, max_finite_encoding(f, false)));
  if (mpfr_cmpabs(unbounded, largest) > 0) {
    const Flags fl = flag_overflow | flag_inexact;
    const Overflow ov = detail::effective_overflow(f, opt);
    if (!detail::overflow_goes_to_infinity(mode, negative) || ov == Overflow::saturate)
      return {max_finite_encoding(f, negative), fl};
    if (ov == Overflow::infinity) return {infinity_encoding(f, negative), fl};
    return {nan_encoding(f, negative), fl};
  }
  const bool tiny = long(mpfr_get_exp(unbounded)) - 1 < smallest_normal_exponent(f);
  if (!tiny) return {detail::encode_finite(f, unbounded), Flags(inexact ? flag_inexact : 0)};
  if (opt.flush_subnormal_outputs && f.has_zero)
    return {zero_encoding(f, negative), Flags(flag_underflow | flag_inexact)};
  Real bounded(p);
  const bool inexact_bounded = detail::round_on_grid(bounded, x, f, detail::Range::format, mode);
  const Flags fl = inexact_bounded ? Flags(flag_underflow | flag_inexact) : Flags(0);
  if (mpfr_zero_p(bounded)) return {zero_encoding(f, negative), fl};
  return {detail::encode_finite(f, bounded), fl};
}

// ---------------------------------------------------------------------------
// Conversion.

// Conversion between formats (or from binary64) of one encoding.
// - NaN: invalid for a signalling NaN or when `to` has no NaN. An IEEE
//   target keeps the sign and the top payload bits and sets the quiet bit
//   (x86 and SoftFloat); other targets get their NaN with the sign. A
//   source NaN's payload is its fraction below the top (quiet) bit in every
//   encoding that has fraction bits (IEEE, and OCP E4M3's S.1111.111: payload
//   11); the fnuz formats' -0 pattern and E8M0's 0xFF carry none.
// - Infinity: kept where `to` has one; else a saturating target (or one
//   without NaN) gives the largest finite with overflow|inexact, and the rest
//   give NaN with invalid. An unsigned target turns -inf into invalid NaN.
inline Expected convert(const Format& to, const Format& from, std::uint64_t bits, RoundingMode mode,
                        const Options& opt = {}) {
  const Decoded d = decode(from, bits, opt.flush_subnormal_inputs);
  if (d.is_nan()) {
    Flags fl = d.kind == Kind::signaling_nan || to.nan == NanEncoding::none ? flag_invalid : 0;
    if (to.nan != NanEncoding::ieee) return {nan_encoding(to, d.sign), fl};
    std::uint64_t payload = 0;  // fraction bits below the quiet bit, left-aligned
    if (from.nan != NanEncoding::negative_zero && from.man_bits > 1) {
      payload = bits & (fraction_mask(from) >> 1);
      const int from_bits = from.man_bits - 1, to_bits = to.man_bits - 1;
      payload = to_bits >= from_bits ? payload << (to_bits - from_bits) : payload >> (from_bits - to_bits);
    }
    return {nan_encoding(to, d.sign) | payload, fl};
  }
  if (d.kind == Kind::infinity) {
    if (to.nonfinite == NonFinite::ieee) return {infinity_encoding(to, d.sign), 0};
    if (!to.has_sign && d.sign) return {default_nan(to), flag_invalid};
    if (detail::effective_overflow(to, opt) == Overflow::saturate || to.nan == NanEncoding::none)
      return {max_finite_encoding(to, d.sign), Flags(flag_overflow | flag_inexact)};
    return {nan_encoding(to, d.sign), flag_invalid};
  }
  Real x(64);
  set_exact(x, d);
  return round_exact(to, x, mode, opt);
}

inline std::string describe(const Format& f, std::uint64_t bits) {
  std::ostringstream s;
  s << f.name << ":0x" << std::hex << bits;
  return s.str();
}

}  // namespace rpsim::oracle

// The arithmetic half of the oracle (add sub mul div sqrt fma).
#include "mpfr_oracle_arithmetic.hpp"  // IWYU pragma: export
