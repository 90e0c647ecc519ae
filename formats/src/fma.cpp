#include "exact.hpp"
#include "rpsim/formats/ops.hpp"

namespace rpsim {

// NaN and infinity handling follows SoftFloat's s_mulAdd: a NaN among a, b
// wins over one in c; inf * 0 is invalid even when c is a quiet NaN.
std::uint64_t fma(const Format& f, std::uint64_t a, std::uint64_t b, std::uint64_t c, const Rounding& r,
                  Flags& fl) {
  const Unpacked x = unpack(f, a, r.flush_subnormal_inputs);
  const Unpacked y = unpack(f, b, r.flush_subnormal_inputs);
  const Unpacked z = unpack(f, c, r.flush_subnormal_inputs);
  const bool psign = x.sign != y.sign;
  if (x.is_nan() || y.is_nan()) {
    const std::uint64_t ab = propagate_nan(f, a, b, r.nan_policy, fl);
    return z.is_nan() ? propagate_nan(f, ab, c, r.nan_policy, fl) : ab;
  }
  if (x.cls == Class::infinity || y.cls == Class::infinity) {
    const bool zero_factor = x.cls == Class::zero || y.cls == Class::zero;
    if (!zero_factor) {
      if (z.is_nan()) return propagate_nan(f, f.inf_bits(psign), c, r.nan_policy, fl);
      if (z.cls != Class::infinity || z.sign == psign) return f.inf_bits(psign);
    }
    fl |= flag_invalid;
    const std::uint64_t dn = default_nan(f, r.nan_policy);
    return z.is_nan() ? propagate_nan(f, dn, c, r.nan_policy, fl) : dn;
  }
  if (z.is_nan()) return propagate_nan(f, f.zero_bits(false), c, r.nan_policy, fl);
  if (z.cls == Class::infinity) return c;
  detail::Exact product{psign, x.exponent + y.exponent, u128(x.significand) * y.significand, false};
  if (x.cls == Class::zero || y.cls == Class::zero) product.significand = 0;
  return detail::pack(f, detail::exact_sum(product, detail::exact_of(z), r.mode), r, fl);
}

}  // namespace rpsim
