#include "exact.hpp"
#include "rpsim/formats/ops.hpp"

namespace rpsim {

std::uint64_t mul(const Format& f, std::uint64_t a, std::uint64_t b, const Rounding& r, Flags& fl) {
  const Unpacked x = unpack(f, a, r.flush_subnormal_inputs);
  const Unpacked y = unpack(f, b, r.flush_subnormal_inputs);
  if (x.is_nan() || y.is_nan()) return propagate_nan(f, a, b, r.nan_policy, fl);
  const bool sign = x.sign != y.sign;
  if (x.cls == Class::infinity || y.cls == Class::infinity) {
    if (x.cls == Class::zero || y.cls == Class::zero) {
      fl |= flag_invalid;
      return default_nan(f, r.nan_policy);
    }
    return f.inf_bits(sign);
  }
  const u128 product = u128(x.significand) * y.significand;
  return round_pack(f, sign, x.exponent + y.exponent, product, false, r, fl);
}

}  // namespace rpsim
