// How NaNs look: the one place that knows (SoftFloat keeps this in its
// per-platform specialization folder), in the shared scalar core
// (scalar_core.hpp); these are its host entry points.
#include "rpsim/formats/scalar_convert.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim {

std::uint64_t default_nan(const Format& fmt, NanPolicy policy) {
  return hd::default_nan(fmt, policy);
}

std::uint64_t nan_from(const Format& fmt, const Unpacked& nan, NanPolicy policy) {
  return hd::nan_from(fmt, nan, policy);
}

std::uint64_t propagate_nan(const Format& fmt, std::uint64_t a, std::uint64_t b, NanPolicy policy,
                            Flags& flags) {
  return hd::propagate_nan(fmt, a, b, policy, flags);
}

}  // namespace rpsim
