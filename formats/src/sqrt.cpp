#include <cmath>

#include "exact.hpp"
#include "rpsim/formats/ops.hpp"

namespace rpsim {
namespace {

// floor(sqrt(n)) for n < 2^127: a long-double estimate, then exact integer
// correction.
std::uint64_t isqrt(u128 n) {
  auto r = std::uint64_t(std::sqrt(static_cast<long double>(n)));
  while (u128(r) * r > n) --r;
  while (u128(r + 1) * (r + 1) <= n) ++r;
  return r;
}

}  // namespace

std::uint64_t sqrt(const Format& f, std::uint64_t a, const Rounding& r, Flags& fl) {
  const Unpacked x = unpack(f, a, r.flush_subnormal_inputs);
  if (x.is_nan()) return propagate_nan(f, a, a, r.nan_policy, fl);
  if (x.cls == Class::zero) return round_pack(f, x.sign, 0, 0, false, r, fl);
  if (x.sign) {
    fl |= flag_invalid;
    return default_nan(f, r.nan_policy);
  }
  if (x.cls == Class::infinity) return f.inf_bits(false);
  // Scale to ~2^125 with an even exponent: the root then has ~63 bits.
  int s = 125 - detail::msb_index(x.significand);
  if ((x.exponent - s) & 1) s += 1;
  const u128 n = u128(x.significand) << s;
  const std::uint64_t root = isqrt(n);
  const bool sticky = u128(root) * root != n;
  return round_pack(f, false, (x.exponent - s) / 2, root, sticky, r, fl);
}

}  // namespace rpsim
