// An independent reference for the formats core, for differential fuzzing.
//
// Nothing here calls the core's decoding or rounding: operands are decoded
// from the Format descriptor's fields (exp_bits, man_bits, bias, has_sign,
// has_zero, subnormals, nonfinite, nan), the operation is evaluated by MPFR
// truncated to kWorkBits bits plus a sticky bit (truncation + sticky carries
// the information of round-to-odd, which determines the correct rounding to
// any precision <= kWorkBits - 2; Boldo & Melquiond, IEEE TC 2008), and the
// final rounding to the format is done here on GMP integers.
//
// Conventions the IEEE standard does not fix, and which follow what the
// formats core documents (format.hpp, rounding.hpp, round.cpp, nan.cpp):
//  - tininess is detected after rounding; underflow is raised only if inexact;
//  - NaN results are compared as "some NaN of the format" (payload and sign
//    propagation are TestFloat's business); a format without NaN returns +0;
//  - an unsigned format (E8M0) gives invalid + NaN for any non-zero negative
//    result, and its smallest encoding stands in for an exact zero;
//  - a format without infinity: x/0 raises divide-by-zero and gives what
//    converting an infinity gives (NaN with invalid, or saturation);
//  - without subnormals, the field-0 encodings read as zero and tiny results
//    round to 0 or the smallest normal.
#pragma once

#include <gmp.h>
#include <mpfr.h>

#include <cstdint>
#include <optional>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::fuzz {

inline constexpr mpfr_prec_t kWorkBits = 256;

enum class RefOp { add, sub, mul, div, sqrt, fma, convert, eq, le, lt, eq_signaling, le_quiet, lt_quiet };
inline constexpr int kRefOpCount = 13;
inline const char* ref_op_name(RefOp op) {
  static const char* const names[] = {"add", "sub", "mul", "div",          "sqrt",     "fma",     "convert",
                                      "eq",  "le",  "lt",  "eq_signaling", "le_quiet", "lt_quiet"};
  return names[int(op)];
}
inline bool is_compare(RefOp op) {
  return op >= RefOp::eq;
}

enum class Kind { zero, finite, infinity, quiet_nan, signaling_nan };

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

class Reference {
 public:
  Reference() {
    for (mpfr_t* x : {&a_, &b_, &c_}) mpfr_init2(*x, 64);
    mpfr_init2(r_, kWorkBits);
    mpz_init(m_);
  }
  ~Reference() {
    for (mpfr_t* x : {&a_, &b_, &c_, &r_}) mpfr_clear(*x);
    mpz_clear(m_);
  }
  Reference(const Reference&) = delete;
  Reference& operator=(const Reference&) = delete;

  // `from` is the operand format of a conversion (ignored otherwise).
  RefResult compute(RefOp op, const Format& f, const Format& from, const std::uint64_t* operand,
                    const Rounding& rnd) {
    RefResult out;
    const Format& in = op == RefOp::convert ? from : f;
    const bool daz = rnd.flush_subnormal_inputs && !is_compare(op);
    const Kind ka = decode(in, operand[0], daz, a_);
    const Kind kb = decode(in, operand[1], daz, b_);
    const Kind kc = decode(in, operand[2], daz, c_);
    const bool sa = mpfr_signbit(a_) != 0, sb = mpfr_signbit(b_) != 0, sc = mpfr_signbit(c_) != 0;
    auto nan = [](Kind k) { return k == Kind::quiet_nan || k == Kind::signaling_nan; };
    auto snan = [](Kind k) { return k == Kind::signaling_nan; };

    if (is_compare(op)) {
      const bool signaling = op == RefOp::le || op == RefOp::lt || op == RefOp::eq_signaling;
      if (nan(ka) || nan(kb)) {
        if (signaling || snan(ka) || snan(kb)) out.flags |= flag_invalid;
        out.bits = 0;
        return out;
      }
      const int c = mpfr_cmp(a_, b_);
      const bool result = (op == RefOp::eq || op == RefOp::eq_signaling) ? c == 0
                          : (op == RefOp::le || op == RefOp::le_quiet)   ? c <= 0
                                                                         : c < 0;
      out.bits = result ? 1 : 0;
      return out;
    }

    auto invalid_nan = [&] {
      out.flags |= flag_invalid;
      return nan_result(f, out);
    };
    auto propagate = [&](std::initializer_list<Kind> ks) {
      for (Kind k : ks)
        if (snan(k)) out.flags |= flag_invalid;
      return nan_result(f, out);
    };

    switch (op) {
      case RefOp::convert: {
        if (nan(ka)) {
          if (snan(ka) || !f.has_nan()) out.flags |= flag_invalid;
          return nan_result(f, out);
        }
        if (ka == Kind::infinity) {
          if (f.has_inf()) return exact(out, inf_bits(f, sa));
          if (!f.has_sign && sa) return invalid_nan();
          if (rnd.overflow.value_or(f.overflow) == Overflow::saturate || !f.has_nan()) {
            out.flags |= flag_overflow | flag_inexact;
            return exact(out, max_finite_bits(f, sa));
          }
          return invalid_nan();
        }
        if (ka == Kind::zero) return exact(out, zero_bits(f, sa && f.has_sign));
        return round(f, rnd, a_, false, out);
      }
      case RefOp::add:
      case RefOp::sub: {
        if (nan(ka) || nan(kb)) return propagate({ka, kb});
        const bool sy = op == RefOp::sub ? !sb : sb;
        if (ka == Kind::infinity || kb == Kind::infinity) {
          if (ka == Kind::infinity && kb == Kind::infinity && sa != sy) return invalid_nan();
          return exact(out, inf_bits(f, ka == Kind::infinity ? sa : sy));
        }
        const int t = op == RefOp::add ? mpfr_add(r_, a_, b_, MPFR_RNDZ) : mpfr_sub(r_, a_, b_, MPFR_RNDZ);
        if (mpfr_zero_p(r_)) return exact_zero(f, rnd, sa == sy ? sa : rnd.mode == RoundingMode::down, out);
        return round(f, rnd, r_, t != 0, out);
      }
      case RefOp::mul: {
        if (nan(ka) || nan(kb)) return propagate({ka, kb});
        const bool s = sa != sb;
        if (ka == Kind::infinity || kb == Kind::infinity) {
          if (ka == Kind::zero || kb == Kind::zero) return invalid_nan();
          return exact(out, inf_bits(f, s));
        }
        if (ka == Kind::zero || kb == Kind::zero) return exact_zero(f, rnd, s, out);
        const int t = mpfr_mul(r_, a_, b_, MPFR_RNDZ);
        return round(f, rnd, r_, t != 0, out);
      }
      case RefOp::div: {
        if (nan(ka) || nan(kb)) return propagate({ka, kb});
        const bool s = sa != sb;
        if (ka == Kind::infinity) {
          if (kb == Kind::infinity) return invalid_nan();
          return exact(out, inf_bits(f, s));
        }
        if (kb == Kind::infinity) return exact_zero(f, rnd, s, out);
        if (kb == Kind::zero) {
          if (ka == Kind::zero) return invalid_nan();
          out.flags |= flag_infinite;
          if (f.has_inf()) return exact(out, inf_bits(f, s));
          if (!f.has_sign && s) return invalid_nan();
          // The exact result is an infinity the format lacks: as converting
          // one, NaN (invalid) unless the format saturates, in every mode.
          if (rnd.overflow.value_or(f.overflow) == Overflow::saturate || !f.has_nan()) {
            out.flags |= flag_overflow | flag_inexact;
            return exact(out, max_finite_bits(f, s));
          }
          return invalid_nan();
        }
        if (ka == Kind::zero) return exact_zero(f, rnd, s, out);
        const int t = mpfr_div(r_, a_, b_, MPFR_RNDZ);
        return round(f, rnd, r_, t != 0, out);
      }
      case RefOp::sqrt: {
        if (nan(ka)) return propagate({ka});
        if (ka == Kind::zero) return exact_zero(f, rnd, sa, out);
        if (sa) return invalid_nan();
        if (ka == Kind::infinity) return exact(out, inf_bits(f, false));
        const int t = mpfr_sqrt(r_, a_, MPFR_RNDZ);
        return round(f, rnd, r_, t != 0, out);
      }
      case RefOp::fma: {
        const bool ps = sa != sb;
        if (nan(ka) || nan(kb)) return propagate({ka, kb, kc});
        if (ka == Kind::infinity || kb == Kind::infinity) {
          // IEEE 754 7.2(c): inf * 0 is invalid even when c is a quiet NaN.
          if (ka == Kind::zero || kb == Kind::zero) {
            out.flags |= flag_invalid;
            return propagate({kc});
          }
          if (nan(kc)) return propagate({kc});
          if (kc == Kind::infinity && sc != ps) return invalid_nan();
          return exact(out, inf_bits(f, ps));
        }
        if (nan(kc)) return propagate({kc});
        if (kc == Kind::infinity) return exact(out, inf_bits(f, sc));
        const bool product_zero = ka == Kind::zero || kb == Kind::zero;
        if (product_zero && kc == Kind::zero)
          return exact_zero(f, rnd, ps == sc ? ps : rnd.mode == RoundingMode::down, out);
        const int t = mpfr_fma(r_, a_, b_, c_, MPFR_RNDZ);
        if (mpfr_zero_p(r_)) return exact_zero(f, rnd, rnd.mode == RoundingMode::down, out);
        return round(f, rnd, r_, t != 0, out);
      }
      default: break;
    }
    return out;
  }

  // Decodes an encoding of `f` into an MPFR value (zero and infinity signed).
  static Kind decode(const Format& f, std::uint64_t bits, bool daz, mpfr_t out) {
    const int width = int(f.has_sign) + f.exp_bits + f.man_bits;
    if (width < 64) bits &= (std::uint64_t(1) << width) - 1;
    const bool sign = f.has_sign && ((bits >> (width - 1)) & 1);
    const std::uint64_t man_all = (std::uint64_t(1) << f.man_bits) - 1;
    const std::uint64_t field_all = (std::uint64_t(1) << f.exp_bits) - 1;
    const std::uint64_t man = bits & man_all;
    const std::uint64_t field = (bits >> f.man_bits) & field_all;
    auto signed_special = [&](Kind k) {
      if (k == Kind::infinity)
        mpfr_set_inf(out, sign ? -1 : 1);
      else if (k == Kind::zero)
        mpfr_set_zero(out, sign ? -1 : 1);
      else
        mpfr_set_nan(out);
      return k;
    };
    switch (f.nan) {
      case NanEncoding::ieee:
        if (field == field_all) {
          if (man == 0) return signed_special(Kind::infinity);
          return signed_special((man >> (f.man_bits - 1)) & 1 ? Kind::quiet_nan : Kind::signaling_nan);
        }
        break;
      case NanEncoding::all_ones:
        if (field == field_all && man == man_all) return signed_special(Kind::quiet_nan);
        break;
      case NanEncoding::negative_zero:
        if (sign && field == 0 && man == 0) return signed_special(Kind::quiet_nan);
        break;
      case NanEncoding::none: break;
    }
    const std::int64_t emin = (f.has_zero ? 1 : 0) - std::int64_t(f.bias);
    std::uint64_t sig;
    std::int64_t exp;
    if (field == 0 && f.has_zero) {
      if (man == 0 || daz || !f.subnormals) return signed_special(Kind::zero);
      sig = man;
      exp = emin - f.man_bits;
    } else {
      sig = man | (std::uint64_t(1) << f.man_bits);
      exp = std::int64_t(field) - f.bias - f.man_bits;
    }
    mpfr_set_ui_2exp(out, sig, mpfr_exp_t(exp), MPFR_RNDN);  // exact: sig < 2^64
    if (sign) mpfr_neg(out, out, MPFR_RNDN);
    return Kind::finite;
  }

 private:
  static std::uint64_t sign_bit(const Format& f) {
    const int width = int(f.has_sign) + f.exp_bits + f.man_bits;
    return f.has_sign ? std::uint64_t(1) << (width - 1) : 0;
  }
  static std::uint64_t inf_bits(const Format& f, bool sign) {
    return (sign ? sign_bit(f) : 0) | ((((std::uint64_t(1) << f.exp_bits) - 1)) << f.man_bits);
  }
  static std::uint64_t max_finite_bits(const Format& f, bool sign) {
    const Geometry g(f);
    return (sign ? sign_bit(f) : 0) | (std::uint64_t(g.max_field) << f.man_bits) | g.max_man;
  }
  static std::uint64_t zero_bits(const Format& f, bool sign) {
    if (!f.has_zero || f.nan == NanEncoding::negative_zero) return 0;
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

  // Rounds the non-zero finite value x (plus `sticky` below its last bit) to f.
  RefResult& round(const Format& f, const Rounding& rnd, mpfr_t x, bool sticky, RefResult& out) {
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

  mpfr_t a_, b_, c_, r_;
  mpz_t m_;
};

}  // namespace rpsim::fuzz
