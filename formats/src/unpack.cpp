// Decoding: the shared scalar core's unpack (scalar_core.hpp).
#include "rpsim/formats/scalar_core.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim {

Unpacked unpack(const Format& fmt, std::uint64_t bits, bool flush_subnormals) {
  return hd::unpack(fmt, bits, flush_subnormals);
}

bool is_subnormal(const Format& fmt, std::uint64_t bits) {
  if (!fmt.has_zero || !fmt.subnormals || fmt.is_fixed_point()) return false;
  const std::uint64_t field = (bits >> fmt.man_bits) & fmt.exp_field_max();
  return field == 0 && (bits & fmt.man_mask()) != 0;
}

bool is_nan(const Format& fmt, std::uint64_t bits) {
  return unpack(fmt, bits).is_nan();
}

bool is_signaling_nan(const Format& fmt, std::uint64_t bits) {
  return unpack(fmt, bits).cls == Class::signaling_nan;
}

}  // namespace rpsim
