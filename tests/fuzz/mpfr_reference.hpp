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
//    round to 0 or the smallest normal;
//  - fixed point (format.hpp): two's complement times 2^-frac_bits, one zero,
//    saturation in every mode, no subnormals (DAZ/FTZ do nothing), underflow
//    when a non-zero value rounds to 0.
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

}  // namespace rpsim::fuzz

#include "mpfr_reference_rounding.hpp"

namespace rpsim::fuzz {

class Reference : private ReferenceRounding {
 public:
  Reference() {
    for (mpfr_t* x : {&a_, &b_, &c_}) mpfr_init2(*x, 64);
    mpfr_init2(r_, kWorkBits);
  }
  ~Reference() {
    for (mpfr_t* x : {&a_, &b_, &c_, &r_}) mpfr_clear(*x);
  }
  Reference(const Reference&) = delete;
  Reference& operator=(const Reference&) = delete;

  // `from` is the operand format of a conversion (ignored otherwise).
  RefResult compute(RefOp op, const Format& f, const Format& from, const std::uint64_t* operand,
                    const Rounding& rnd) {
    const Format& in = op == RefOp::convert ? from : f;
    const bool daz = rnd.flush_subnormal_inputs && !is_compare(op);
    In x;
    x.ka = decode(in, operand[0], daz, a_);
    x.kb = decode(in, operand[1], daz, b_);
    x.kc = decode(in, operand[2], daz, c_);
    x.sa = mpfr_signbit(a_) != 0;
    x.sb = mpfr_signbit(b_) != 0;
    x.sc = mpfr_signbit(c_) != 0;
    if (is_compare(op)) return compare(op, x);
    switch (op) {
      case RefOp::convert: return convert(f, rnd, x);
      case RefOp::add:
      case RefOp::sub: return add_sub(op, f, rnd, x);
      case RefOp::mul: return mul(f, rnd, x);
      case RefOp::div: return div(f, rnd, x);
      case RefOp::sqrt: return sqrt(f, rnd, x);
      case RefOp::fma: return fma(f, rnd, x);
      default: break;
    }
    return RefResult{};
  }

 private:
  // The decoded operands' kinds and signs (values in a_, b_, c_).
  struct In {
    Kind ka, kb, kc;
    bool sa, sb, sc;
  };
  static bool nan(Kind k) { return k == Kind::quiet_nan || k == Kind::signaling_nan; }
  static bool snan(Kind k) { return k == Kind::signaling_nan; }

  RefResult compare(RefOp op, const In& x) {
    RefResult out;
    const bool signaling = op == RefOp::le || op == RefOp::lt || op == RefOp::eq_signaling;
    if (nan(x.ka) || nan(x.kb)) {
      if (signaling || snan(x.ka) || snan(x.kb)) out.flags |= flag_invalid;
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

  static RefResult invalid_nan(const Format& f, RefResult out = {}) {
    out.flags |= flag_invalid;
    return nan_result(f, out);
  }
  static RefResult propagate(const Format& f, std::initializer_list<Kind> ks, RefResult out = {}) {
    for (Kind k : ks)
      if (snan(k)) out.flags |= flag_invalid;
    return nan_result(f, out);
  }
  // An infinity entering a format: kept where it has one; else NaN (invalid)
  // unless the format saturates or has no NaN (the largest finite, overflow).
  static RefResult infinity_into(const Format& f, const Rounding& rnd, bool sign, RefResult out = {}) {
    if (f.has_inf()) return exact(out, inf_bits(f, sign));
    if (!f.has_sign && sign) return invalid_nan(f, out);
    if (rnd.overflow.value_or(f.overflow) == Overflow::saturate || !f.has_nan()) {
      out.flags |= flag_overflow | flag_inexact;
      return exact(out, max_finite_bits(f, sign));
    }
    return invalid_nan(f, out);
  }

  RefResult convert(const Format& f, const Rounding& rnd, const In& x) {
    RefResult out;
    if (nan(x.ka)) {
      if (snan(x.ka) || !f.has_nan()) out.flags |= flag_invalid;
      return nan_result(f, out);
    }
    if (x.ka == Kind::infinity) return infinity_into(f, rnd, x.sa);
    if (x.ka == Kind::zero) return exact(out, zero_bits(f, x.sa && f.has_sign));
    return round(f, rnd, a_, false, out);
  }

  RefResult add_sub(RefOp op, const Format& f, const Rounding& rnd, const In& x) {
    RefResult out;
    if (nan(x.ka) || nan(x.kb)) return propagate(f, {x.ka, x.kb});
    const bool sy = op == RefOp::sub ? !x.sb : x.sb;
    if (x.ka == Kind::infinity || x.kb == Kind::infinity) {
      if (x.ka == Kind::infinity && x.kb == Kind::infinity && x.sa != sy) return invalid_nan(f);
      return exact(out, inf_bits(f, x.ka == Kind::infinity ? x.sa : sy));
    }
    const int t = op == RefOp::add ? mpfr_add(r_, a_, b_, MPFR_RNDZ) : mpfr_sub(r_, a_, b_, MPFR_RNDZ);
    if (mpfr_zero_p(r_)) return exact_zero(f, rnd, x.sa == sy ? x.sa : rnd.mode == RoundingMode::down, out);
    return round(f, rnd, r_, t != 0, out);
  }

  RefResult mul(const Format& f, const Rounding& rnd, const In& x) {
    RefResult out;
    if (nan(x.ka) || nan(x.kb)) return propagate(f, {x.ka, x.kb});
    const bool s = x.sa != x.sb;
    if (x.ka == Kind::infinity || x.kb == Kind::infinity) {
      if (x.ka == Kind::zero || x.kb == Kind::zero) return invalid_nan(f);
      return exact(out, inf_bits(f, s));
    }
    if (x.ka == Kind::zero || x.kb == Kind::zero) return exact_zero(f, rnd, s, out);
    const int t = mpfr_mul(r_, a_, b_, MPFR_RNDZ);
    return round(f, rnd, r_, t != 0, out);
  }

  RefResult div(const Format& f, const Rounding& rnd, const In& x) {
    RefResult out;
    if (nan(x.ka) || nan(x.kb)) return propagate(f, {x.ka, x.kb});
    const bool s = x.sa != x.sb;
    if (x.ka == Kind::infinity) {
      if (x.kb == Kind::infinity) return invalid_nan(f);
      return exact(out, inf_bits(f, s));
    }
    if (x.kb == Kind::infinity) return exact_zero(f, rnd, s, out);
    if (x.kb == Kind::zero) {
      if (x.ka == Kind::zero) return invalid_nan(f);
      // The exact result is an infinity: what converting one gives, in every
      // mode, with the divide-by-zero flag.
      out.flags |= flag_infinite;
      return infinity_into(f, rnd, s, out);
    }
    if (x.ka == Kind::zero) return exact_zero(f, rnd, s, out);
    const int t = mpfr_div(r_, a_, b_, MPFR_RNDZ);
    return round(f, rnd, r_, t != 0, out);
  }

  RefResult sqrt(const Format& f, const Rounding& rnd, const In& x) {
    RefResult out;
    if (nan(x.ka)) return propagate(f, {x.ka});
    if (x.ka == Kind::zero) return exact_zero(f, rnd, x.sa, out);
    if (x.sa) return invalid_nan(f);
    if (x.ka == Kind::infinity) return exact(out, inf_bits(f, false));
    const int t = mpfr_sqrt(r_, a_, MPFR_RNDZ);
    return round(f, rnd, r_, t != 0, out);
  }

  RefResult fma(const Format& f, const Rounding& rnd, const In& x) {
    RefResult out;
    const bool ps = x.sa != x.sb;
    if (nan(x.ka) || nan(x.kb)) return propagate(f, {x.ka, x.kb, x.kc});
    if (x.ka == Kind::infinity || x.kb == Kind::infinity) {
      // IEEE 754 7.2(c): inf * 0 is invalid even when c is a quiet NaN.
      if (x.ka == Kind::zero || x.kb == Kind::zero) {
        out.flags |= flag_invalid;
        return propagate(f, {x.kc}, out);
      }
      if (nan(x.kc)) return propagate(f, {x.kc});
      if (x.kc == Kind::infinity && x.sc != ps) return invalid_nan(f);
      return exact(out, inf_bits(f, ps));
    }
    if (nan(x.kc)) return propagate(f, {x.kc});
    if (x.kc == Kind::infinity) return exact(out, inf_bits(f, x.sc));
    const bool product_zero = x.ka == Kind::zero || x.kb == Kind::zero;
    if (product_zero && x.kc == Kind::zero)
      return exact_zero(f, rnd, ps == x.sc ? ps : rnd.mode == RoundingMode::down, out);
    const int t = mpfr_fma(r_, a_, b_, c_, MPFR_RNDZ);
    if (mpfr_zero_p(r_)) return exact_zero(f, rnd, rnd.mode == RoundingMode::down, out);
    return round(f, rnd, r_, t != 0, out);
  }

 public:
  // Decodes an encoding of `f` into an MPFR value (zero and infinity signed).
  static Kind decode(const Format& f, std::uint64_t bits, bool daz, mpfr_t out) {
    const int width = int(f.has_sign) + f.exp_bits + f.man_bits;
    if (width < 64) bits &= (std::uint64_t(1) << width) - 1;
    if (f.kind == FormatKind::fixed_point) {  // two's complement times 2^-frac_bits; +0 is the only zero
      const bool negative = (bits >> (width - 1)) & 1;
      const std::uint64_t magnitude = negative ? (std::uint64_t(1) << width) - bits : bits;
      if (magnitude == 0) {
        mpfr_set_zero(out, 1);
        return Kind::zero;
      }
      mpfr_set_ui_2exp(out, magnitude, -mpfr_exp_t(f.frac_bits), MPFR_RNDN);  // exact: below 2^53
      if (negative) mpfr_neg(out, out, MPFR_RNDN);
      return Kind::finite;
    }
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

  mpfr_t a_, b_, c_, r_;
};

}  // namespace rpsim::fuzz
