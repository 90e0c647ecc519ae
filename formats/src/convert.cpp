#include "exact.hpp"
#include "rpsim/formats/ops.hpp"

namespace rpsim {
namespace {

// A NaN or infinity entering a format that may lack them.
std::uint64_t convert_nonfinite(const Format& to, const Unpacked& u, const Rounding& r, Flags& fl) {
  if (u.is_nan()) {
    if (u.cls == Class::signaling_nan || !to.has_nan()) fl |= flag_invalid;
    return nan_from(to, u, r.nan_policy);
  }
  if (to.has_inf()) return to.inf_bits(u.sign);
  if (!to.has_sign && u.sign) {
    fl |= flag_invalid;
    return default_nan(to, r.nan_policy);
  }
  // No infinity: OCP says saturate or NaN (E4M3 non-saturating); a format
  // without NaN has to saturate.
  if (r.overflow.value_or(to.overflow) == Overflow::saturate || !to.has_nan()) {
    fl |= flag_overflow | flag_inexact;
    return to.max_finite_bits(u.sign);
  }
  fl |= flag_invalid;
  Unpacked n;
  n.cls = Class::quiet_nan;
  n.sign = u.sign;
  return nan_from(to, n, r.nan_policy);
}

}  // namespace

std::uint64_t convert(const Format& to, const Format& from, std::uint64_t bits, const Rounding& r,
                      Flags& fl) {
  const Unpacked u = unpack(from, bits, r.flush_subnormal_inputs);
  if (u.cls == Class::finite) return round_pack(to, u.sign, u.exponent, u.significand, false, r, fl);
  if (u.cls == Class::zero) return round_pack(to, u.sign && to.has_sign, 0, 0, false, r, fl);
  return convert_nonfinite(to, u, r, fl);
}

}  // namespace rpsim
