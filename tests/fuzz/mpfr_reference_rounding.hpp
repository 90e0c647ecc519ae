// The final rounding of the fuzzing reference (mpfr_reference.hpp): an exact
// value (GMP integer times a power of two, plus a sticky bit) to an encoding
// of any format, written from the Format descriptor's primary fields alone,
// and the encodings of zeros, infinities and the largest finite value.
#pragma once

#include <gmp.h>
#include <mpfr.h>

#include <cstdint>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::fuzz {

struct RefResult {
  bool nan = false;        // the result is a NaN (any NaN of the format)
  std::uint64_t bits = 0;  // otherwise the exact encoding (0/1 for comparisons)
  Flags flags = 0;
};

// The format's geometry, recomputed from the descriptor's primary fields.
struct Geometry {
  int p = 0;                   // precision
  std::int64_t emin = 0;       // exponent of the smallest normal
  std::int64_t max_field = 0;  // largest exponent field of a finite number
  std::uint64_t max_man = 0;   // fraction of the largest finite number
  std::int64_t emax = 0;
  std::uint64_t max_sig = 0;  // significand of the largest finite, implicit bit included

  explicit Geometry(const Format& f) {
    p = f.man_bits + 1;
    emin = (f.has_zero ? 1 : 0) - std::int64_t(f.bias);
    const std::int64_t all_ones_field = (std::int64_t(1) << f.exp_bits) - 1;
    const std::uint64_t all_ones_man = (std::uint64_t(1) << f.man_bits) - 1;
    max_field = all_ones_field;
    max_man = all_ones_man;
    if (f.nonfinite == NonFinite::ieee) {
      max_field = all_ones_field - 1;
    } else if (f.nonfinite == NonFinite::nan_only && f.nan == NanEncoding::all_ones) {
      if (f.man_bits == 0)
        max_field = all_ones_field - 1;  // E8M0: 0xFF is NaN
      else
        max_man = all_ones_man - 1;  // S.1111.111 is NaN
    }
    emax = max_field - f.bias;
    max_sig = (std::uint64_t(1) << f.man_bits) | max_man;
  }
};

class ReferenceRounding {
 public:
  ReferenceRounding() { mpz_init(m_); }
  ~ReferenceRounding() { mpz_clear(m_); }
  ReferenceRounding(const ReferenceRounding&) = delete;
  ReferenceRounding& operator=(const ReferenceRounding&) = delete;

 protected:
  static std::uint64_t sign_bit(const Format& f) {
    const int width = int(f.has_sign) + f.exp_bits + f.man_bits;
    return f.has_sign ? std::uint64_t(1) << (width - 1) : 0;
  }
  static std::uint64_t inf_bits(const Format& f, bool sign) {
    return (sign ? sign_bit(f) : 0) | ((((std::uint64_t(1) << f.exp_bits) - 1)) << f.man_bits);
  }
  static std::uint64_t max_finite_bits(const Format& f, bool sign) {
    if (f.kind == FormatKind::fixed_point) {  // two's complement: -2^(w-1) or 2^(w-1) - 1
      return sign ? sign_bit(f) : sign_bit(f) - 1;
    }
    const Geometry g(f);
    return (sign ? sign_bit(f) : 0) | (std::uint64_t(g.max_field) << f.man_bits) | g.max_man;
  }
  static std::uint64_t zero_bits(const Format& f, bool sign) {
    if (!f.has_zero || f.nan == NanEncoding::negative_zero || f.kind == FormatKind::fixed_point) return 0;
    return sign ? sign_bit(f) : 0;
  }
  static RefResult& exact(RefResult& out, std::uint64_t bits) {
    out.bits = bits;
    return out;
  }
  static RefResult& nan_result(const Format& f, RefResult& out) {
    if (f.has_nan())
      out.nan = true;
    else
      out.bits = 0;  // no NaN to return: +0, the invalid flag says so
    return out;
  }
  // An exactly zero result; IEEE 754 6.3 gives its sign, passed by the caller.
  static RefResult& exact_zero(const Format& f, const Rounding&, bool sign, RefResult& out) {
    return exact(out, zero_bits(f, sign && f.has_sign));
  }

  static RefResult& overflow(const Format& f, const Rounding& rnd, bool sign, RefResult& out) {
    out.flags |= flag_overflow | flag_inexact;
    const RoundingMode m = rnd.mode;
    const bool away = m == RoundingMode::nearest_even || m == RoundingMode::nearest_away ||
                      (m == RoundingMode::up && !sign) || (m == RoundingMode::down && sign);
    Overflow ov = rnd.overflow.value_or(f.overflow);
    if (ov == Overflow::infinity && !f.has_inf()) ov = f.has_nan() ? Overflow::nan : Overflow::saturate;
    if (ov == Overflow::nan && !f.has_nan()) ov = Overflow::saturate;
    if (!away || ov == Overflow::saturate) return exact(out, max_finite_bits(f, sign));
    if (ov == Overflow::infinity) return exact(out, inf_bits(f, sign));
    out.nan = true;
    return out;
  }

  struct Rounded {
    std::uint64_t kept;
    bool inexact;
  };
  // m * 2^e (+ sticky below) rounded to a multiple of 2^q.
  Rounded round_at(std::int64_t e, bool sticky, std::int64_t q, bool sign, RoundingMode mode) {
    const std::int64_t shift = q - e;
    bool half = false, above = false, below = false;
    std::uint64_t kept;
    if (shift <= 0) {
      kept = mpz_get_ui(m_) << -shift;  // only reached with small m (callers keep q >= e - 64)
      below = sticky;
    } else {
      const std::size_t len = mpz_sizeinbase(m_, 2);
      if (std::uint64_t(shift) > len) {
        kept = 0;
        below = true;
      } else {
        mpz_t k;
        mpz_init(k);
        mpz_tdiv_q_2exp(k, m_, mp_bitcnt_t(shift));
        kept = mpz_get_ui(k);
        mpz_clear(k);
        const bool half_bit = mpz_tstbit(m_, mp_bitcnt_t(shift - 1));
        const bool lower = sticky || mpz_scan1(m_, 0) < mp_bitcnt_t(shift - 1);
        above = half_bit && lower;
        half = half_bit && !lower;
        below = !half_bit && lower;
      }
    }
    const bool inexact = half || above || below;
    bool up = false;
    switch (mode) {
      case RoundingMode::nearest_even: up = above || (half && (kept & 1)); break;
      case RoundingMode::nearest_away: up = above || half; break;
      case RoundingMode::toward_zero: break;
      case RoundingMode::down: up = inexact && sign; break;
      case RoundingMode::up: up = inexact && !sign; break;
      case RoundingMode::odd:
        if (inexact) kept |= 1;
        break;
      case RoundingMode::stochastic: break;  // not modelled: callers use deterministic modes
    }
    return {kept + (up ? 1 : 0), inexact};
  }

  static int bit_length(std::uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

  // A signed Q format of word length w = man_bits + 1 and frac_bits f: x to
  // a multiple of 2^-f, saturating at -2^(w-1) and 2^(w-1) - 1 (times 2^-f)
  // in every mode; underflow when a non-zero value rounds to 0.
  RefResult& round_fixed(const Format& f, const Rounding& rnd, mpfr_t x, bool sticky, RefResult& out) {
    const bool sign = mpfr_signbit(x) != 0;
    const int w = f.man_bits + 1;
    const std::int64_t e = mpfr_get_z_2exp(m_, x);
    mpz_abs(m_, m_);
    const std::int64_t E = e + std::int64_t(mpz_sizeinbase(m_, 2)) - 1;
    const std::uint64_t min_code = std::uint64_t(1) << (w - 1);
    if (E >= w - 1 - f.frac_bits + 1) {  // |x| >= 2^(w-f): beyond both ends whatever the mode
      out.flags |= flag_overflow | flag_inexact;
      return exact(out, max_finite_bits(f, sign));
    }
    const Rounded r = round_at(e, sticky, -std::int64_t(f.frac_bits), sign, rnd.mode);
    if (r.inexact) out.flags |= flag_inexact;
    if (r.kept == 0) {
      if (r.inexact) out.flags |= flag_underflow;
      return exact(out, 0);
    }
    if (r.kept > (sign ? min_code : min_code - 1)) {
      out.flags |= flag_overflow | flag_inexact;
      return exact(out, max_finite_bits(f, sign));
    }
    const std::uint64_t mask = (min_code << 1) - 1;
    return exact(out, (sign ? ~r.kept + 1 : r.kept) & mask);
  }

  // Rounds the non-zero finite value x (plus `sticky` below its last bit) to f.
  RefResult& round(const Format& f, const Rounding& rnd, mpfr_t x, bool sticky, RefResult& out) {
    if (f.kind == FormatKind::fixed_point) return round_fixed(f, rnd, x, sticky, out);
    const bool sign = mpfr_signbit(x) != 0;
    if (!f.has_sign && sign) {
      out.flags |= flag_invalid;
      return nan_result(f, out);
    }
    const Geometry g(f);
    const std::int64_t e = mpfr_get_z_2exp(m_, x);
    mpz_abs(m_, m_);
    const std::int64_t E = e + std::int64_t(mpz_sizeinbase(m_, 2)) - 1;
    std::int64_t q;
    if (E >= g.emin)
      q = E - (g.p - 1);
    else if (f.subnormals)
      q = g.emin - (g.p - 1);
    else
      q = g.emin;
    const Rounded r = round_at(e, sticky, q, sign, rnd.mode);
    bool tiny = false;
    if (E < g.emin) {
      const std::int64_t qu = E - (g.p - 1);
      const Rounded u = round_at(e, sticky, qu, sign, rnd.mode);
      tiny = bit_length(u.kept) - 1 + qu < g.emin;
    }
    if (r.inexact) out.flags |= flag_inexact;
    if (r.kept == 0 || (tiny && rnd.flush_subnormal_outputs)) {
      if (tiny) out.flags |= flag_underflow | flag_inexact;
      return exact(out, zero_bits(f, sign));
    }
    if (tiny && r.inexact) out.flags |= flag_underflow;
    std::uint64_t K = r.kept;
    std::int64_t Q = q;
    const int len = bit_length(K);
    const std::int64_t Er = len - 1 + Q;
    if (len > g.p) {  // carried to 2^p: drop the zero bit
      K >>= 1;
      Q += 1;
    } else if (Er >= g.emin && len < g.p) {
      K <<= (g.p - len);
      Q -= (g.p - len);
    }
    if (Er > g.emax || (Er == g.emax && K > g.max_sig)) return overflow(f, rnd, sign, out);
    const std::uint64_t s = sign ? sign_bit(f) : 0;
    if (Er < g.emin) return exact(out, s | (K << (Q - (g.emin - f.man_bits))));
    const std::uint64_t field = std::uint64_t(Er + f.bias);
    return exact(out, s | (field << f.man_bits) | (K & ((std::uint64_t(1) << f.man_bits) - 1)));
  }

  mpz_t m_;
};

}  // namespace rpsim::fuzz
