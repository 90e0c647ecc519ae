#include "exact.hpp"
#include "rpsim/formats/ops.hpp"

namespace rpsim {

std::uint64_t div(const Format& f, std::uint64_t a, std::uint64_t b, const Rounding& r, Flags& fl) {
  const Unpacked x = unpack(f, a, r.flush_subnormal_inputs);
  const Unpacked y = unpack(f, b, r.flush_subnormal_inputs);
  if (x.is_nan() || y.is_nan()) return propagate_nan(f, a, b, r.nan_policy, fl);
  const bool sign = x.sign != y.sign;
  if (x.cls == Class::infinity) {
    if (y.cls == Class::infinity) {
      fl |= flag_invalid;
      return default_nan(f, r.nan_policy);
    }
    return f.inf_bits(sign);
  }
  if (y.cls == Class::infinity) return round_pack(f, sign, 0, 0, false, r, fl);
  if (y.cls == Class::zero) {
    if (x.cls == Class::zero) {
      fl |= flag_invalid;
      return default_nan(f, r.nan_policy);
    }
    fl |= flag_infinite;
    if (f.has_inf()) return f.inf_bits(sign);
    // The exact quotient is an infinity, not an overflow: a format without
    // infinities gets what a converted infinity gets (NaN, or saturation),
    // whatever the rounding direction.
    return convert(f, formats::binary64(), sign ? 0xFFF0000000000000ull : 0x7FF0000000000000ull, r, fl);
  }
  if (x.cls == Class::zero) return round_pack(f, sign, 0, 0, false, r, fl);
  // Shift the dividend to the top so the quotient has >= 74 bits: more than
  // p + 2 for every format up to binary64, and the remainder gives sticky.
  const int s = 127 - detail::msb_index(x.significand);
  const u128 num = u128(x.significand) << s;
  const u128 q = num / y.significand;
  const bool sticky = num % y.significand != 0;
  return round_pack(f, sign, x.exponent - s - y.exponent, q, sticky, r, fl);
}

}  // namespace rpsim
