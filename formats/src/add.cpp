// Addition and subtraction: the shared scalar core's (scalar_convert.hpp).
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/scalar_convert.hpp"

namespace rpsim {

std::uint64_t add(const Format& f, std::uint64_t a, std::uint64_t b, const Rounding& r, Flags& fl) {
  return hd::add_signed(f, a, b, false, rounding_desc(r), fl);
}

std::uint64_t sub(const Format& f, std::uint64_t a, std::uint64_t b, const Rounding& r, Flags& fl) {
  return hd::add_signed(f, a, b, true, rounding_desc(r), fl);
}

}  // namespace rpsim
