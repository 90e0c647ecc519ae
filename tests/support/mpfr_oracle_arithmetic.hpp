// The arithmetic half of the MPFR oracle (mpfr_oracle.hpp): add sub mul div
// sqrt fma of encodings, computed exactly in MPFR and rounded once by the
// oracle's own rounding. Nothing here calls rpsim's arithmetic.
#pragma once

#include "mpfr_oracle.hpp"

namespace rpsim::oracle {

namespace detail {

inline bool is_nan(const Format& f, std::uint64_t bits) {
  return decode(f, bits).is_nan();
}
inline bool is_signaling(const Format& f, std::uint64_t bits) {
  return decode(f, bits).kind == Kind::signaling_nan;
}
inline std::uint64_t quieted(const Format& f, std::uint64_t bits) {
  return f.nan == NanEncoding::ieee ? bits | std::uint64_t(1) << (f.man_bits - 1) : bits;
}
// SoftFloat 8086-SSE softfloat_propagateNaN: invalid for a signalling operand;
// the first operand if it is a NaN, else the second; quieted.
inline Expected propagate(const Format& f, std::uint64_t a, std::uint64_t b) {
  const Flags fl = is_signaling(f, a) || is_signaling(f, b) ? flag_invalid : 0;
  return {quieted(f, is_nan(f, a) ? a : b), fl};
}

inline mpfr_prec_t working_precision(const Format& f) {
  return 2 * (f.man_bits + 1) + 16;
}

// Makes an MPFR result computed toward zero into a round-to-odd one: an
// inexact result gets its last bit set.
inline void jam(mpfr_ptr v, int ternary) {
  if (ternary == 0 || mpfr_zero_p(v)) return;
  mpz_t z;
  mpz_init(z);
  mpfr_get_z_2exp(z, v);
  const bool odd = mpz_odd_p(z);
  mpz_clear(z);
  if (odd) return;
  if (mpfr_signbit(v))
    mpfr_nextbelow(v);
  else
    mpfr_nextabove(v);
}

// The mode's MPFR direction decides the sign of an exact zero sum (IEEE 754 6.3).
inline mpfr_rnd_t zero_sign_direction(RoundingMode mode) {
  return mode == RoundingMode::down ? MPFR_RNDD : MPFR_RNDN;
}

}  // namespace detail

enum class Op { add, sub, mul, div, sqrt, fma };

inline const char* op_name(Op op) {
  switch (op) {
    case Op::add: return "add";
    case Op::sub: return "sub";
    case Op::mul: return "mul";
    case Op::div: return "div";
    case Op::sqrt: return "sqrt";
    case Op::fma: return "fma";
  }
  return "?";
}

// Division by zero in a format without infinities: the exact result is an
// infinity, so it becomes what a converted infinity becomes (saturation or
// NaN), independent of the rounding direction, with the divide-by-zero flag.
inline Expected infinite_result(const Format& f, bool negative, const Options& opt) {
  if (f.nonfinite == NonFinite::ieee) return {infinity_encoding(f, negative), 0};
  if (!f.has_sign && negative) return {default_nan(f), flag_invalid};
  if (detail::effective_overflow(f, opt) == Overflow::saturate || f.nan == NanEncoding::none)
    return {max_finite_encoding(f, negative), Flags(flag_overflow | flag_inexact)};
  return {nan_encoding(f, negative), flag_invalid};
}

// The operands of one arithmetic case, decoded, with the exact computation
// and its final rounding: each op below handles its special values first.
struct Case {
  Op op;
  const Format& f;
  std::uint64_t a, b, c;
  RoundingMode mode;
  const Options& opt;
  Decoded x, y, z;
  Expected invalid;
  Real ex{64}, ey{64}, ez{64}, r;

  Case(Op op_, const Format& f_, std::uint64_t a_, std::uint64_t b_, std::uint64_t c_, RoundingMode mode_,
       const Options& opt_)
      : op(op_),
        f(f_),
        a(a_),
        b(b_),
        c(c_),
        mode(mode_),
        opt(opt_),
        x(decode(f_, a_, opt_.flush_subnormal_inputs)),
        y(decode(f_, b_, opt_.flush_subnormal_inputs)),
        z(decode(f_, c_, opt_.flush_subnormal_inputs)),
        invalid{default_nan(f_), flag_invalid},
        r(detail::working_precision(f_)) {}

  // Computes fn into r toward zero, then jammed; an exact zero gets its IEEE
  // sign from the mode's direction. Then one rounding to f.
  template <class Fn>
  Expected compute(Fn&& fn) {
    set_exact(ex, x);
    if (op != Op::sqrt) set_exact(ey, y);
    if (op == Op::fma) set_exact(ez, z);
    int t = fn(MPFR_RNDZ);
    if (t == 0 && mpfr_zero_p(r)) t = fn(detail::zero_sign_direction(mode));
    detail::jam(r, t);
    return round_exact(f, r, mode, opt);
  }
};

inline Expected case_add_sub(Case& k) {
  if (k.x.is_nan() || k.y.is_nan()) return detail::propagate(k.f, k.a, k.b);
  const bool ysign = k.y.sign != (k.op == Op::sub);
  if (k.x.kind == Kind::infinity || k.y.kind == Kind::infinity) {
    if (k.x.kind == Kind::infinity && k.y.kind == Kind::infinity && k.x.sign != ysign) return k.invalid;
    return {infinity_encoding(k.f, k.x.kind == Kind::infinity ? k.x.sign : ysign), 0};
  }
  return k.compute([&](mpfr_rnd_t d) {
    return k.op == Op::add ? mpfr_add(k.r, k.ex, k.ey, d) : mpfr_sub(k.r, k.ex, k.ey, d);
  });
}

inline Expected case_mul(Case& k) {
  if (k.x.is_nan() || k.y.is_nan()) return detail::propagate(k.f, k.a, k.b);
  if (k.x.kind == Kind::infinity || k.y.kind == Kind::infinity) {
    if (k.x.kind == Kind::zero || k.y.kind == Kind::zero) return k.invalid;
    return {infinity_encoding(k.f, k.x.sign != k.y.sign), 0};
  }
  return k.compute([&](mpfr_rnd_t d) { return mpfr_mul(k.r, k.ex, k.ey, d); });
}

inline Expected case_div(Case& k) {
  if (k.x.is_nan() || k.y.is_nan()) return detail::propagate(k.f, k.a, k.b);
  const bool negative = k.x.sign != k.y.sign;
  if (k.x.kind == Kind::infinity) {
    if (k.y.kind == Kind::infinity) return k.invalid;
    return {infinity_encoding(k.f, negative), 0};
  }
  if (k.y.kind == Kind::infinity) return {zero_encoding(k.f, negative), 0};
  if (k.y.kind == Kind::zero) {
    if (k.x.kind == Kind::zero) return k.invalid;
    Expected e = infinite_result(k.f, negative, k.opt);
    e.flags |= flag_infinite;
    return e;
  }
  return k.compute([&](mpfr_rnd_t d) { return mpfr_div(k.r, k.ex, k.ey, d); });
}

inline Expected case_sqrt(Case& k) {
  if (k.x.is_nan()) return detail::propagate(k.f, k.a, k.a);
  if (k.x.kind == Kind::zero) return {zero_encoding(k.f, k.x.sign), 0};
  if (k.x.sign) return k.invalid;
  if (k.x.kind == Kind::infinity) return {infinity_encoding(k.f, false), 0};
  return k.compute([&](mpfr_rnd_t d) { return mpfr_sqrt(k.r, k.ex, d); });
}

// SoftFloat's softfloat_mulAddF*: a NaN in a or b wins (c's signalling state
// still raises invalid); inf * 0 is invalid even when c is NaN.
inline Expected case_fma(Case& k) {
  const bool product_sign = k.x.sign != k.y.sign;
  const Flags c_signals = k.z.kind == Kind::signaling_nan ? flag_invalid : 0;
  if (k.x.is_nan() || k.y.is_nan()) {
    Expected e = detail::propagate(k.f, k.a, k.b);
    e.flags |= c_signals;
    return e;
  }
  if (k.x.kind == Kind::infinity || k.y.kind == Kind::infinity) {
    if (k.x.kind == Kind::zero || k.y.kind == Kind::zero) return {default_nan(k.f), flag_invalid};
    if (k.z.is_nan()) return detail::propagate(k.f, infinity_encoding(k.f, product_sign), k.c);
    if (k.z.kind == Kind::infinity && k.z.sign != product_sign) return k.invalid;
    return {infinity_encoding(k.f, product_sign), 0};
  }
  if (k.z.is_nan()) return detail::propagate(k.f, zero_encoding(k.f, false), k.c);
  if (k.z.kind == Kind::infinity) return {k.c, 0};
  return k.compute([&](mpfr_rnd_t d) { return mpfr_fma(k.r, k.ex, k.ey, k.ez, d); });
}

// a op b (op c for fma) in format f; b and c unused where the op has fewer operands.
inline Expected arithmetic(Op op, const Format& f, std::uint64_t a, std::uint64_t b, std::uint64_t c,
                           RoundingMode mode, const Options& opt = {}) {
  Case k(op, f, a, b, c, mode, opt);
  switch (op) {
    case Op::add:
    case Op::sub: return case_add_sub(k);
    case Op::mul: return case_mul(k);
    case Op::div: return case_div(k);
    case Op::sqrt: return case_sqrt(k);
    case Op::fma: return case_fma(k);
  }
  return k.invalid;
}

}  // namespace rpsim::oracle
