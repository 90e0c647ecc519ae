#include "exact.hpp"
#include "rpsim/formats/ops.hpp"

namespace rpsim {
namespace detail {

Exact exact_sum(Exact x, Exact y, RoundingMode mode) {
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
  if (y.exponent > x.exponent || (y.exponent == x.exponent && y.significand > x.significand)) std::swap(x, y);
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
  Exact r{x.sign, x.exponent, 0, lost || x.sticky};
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

}  // namespace detail

namespace {

std::uint64_t add_signed(const Format& f, std::uint64_t a, std::uint64_t b, bool negate_b, const Rounding& r,
                         Flags& fl) {
  const Unpacked x = unpack(f, a, r.flush_subnormal_inputs);
  const Unpacked y = unpack(f, b, r.flush_subnormal_inputs);
  if (x.is_nan() || y.is_nan()) return propagate_nan(f, a, b, r.nan_policy, fl);
  const bool ysign = y.sign != negate_b;
  if (x.cls == Class::infinity || y.cls == Class::infinity) {
    if (x.cls == Class::infinity && y.cls == Class::infinity && x.sign != ysign) {
      fl |= flag_invalid;
      return default_nan(f, r.nan_policy);
    }
    return f.inf_bits(x.cls == Class::infinity ? x.sign : ysign);
  }
  detail::Exact ey = detail::exact_of(y);
  ey.sign = ysign;
  return detail::pack(f, detail::exact_sum(detail::exact_of(x), ey, r.mode), r, fl);
}

}  // namespace

std::uint64_t add(const Format& f, std::uint64_t a, std::uint64_t b, const Rounding& r, Flags& fl) {
  return add_signed(f, a, b, false, r, fl);
}

std::uint64_t sub(const Format& f, std::uint64_t a, std::uint64_t b, const Rounding& r, Flags& fl) {
  return add_signed(f, a, b, true, r, fl);
}

}  // namespace rpsim
