// Exact intermediates shared by the arithmetic files (internal to formats/).
// The arithmetic itself is the shared scalar core (scalar_convert.hpp).
#pragma once

#include <cstdint>

#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/scalar_convert.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim::detail {

using Exact = ExactValue;

inline int msb_index(u128 x) {
  return hd::msb_index(x);
}

inline Exact exact_of(const Unpacked& u) {
  return {u.sign, u.exponent, u.significand, false};
}

// x + y exactly, except that bits more than ~70 places below the leading bit of
// the larger operand fold into sticky, which cannot change any rounding of a
// format up to binary64. Zero signs follow IEEE 754 6.3.
inline Exact exact_sum(Exact x, Exact y, RoundingMode mode) {
  return hd::exact_sum(x, y, mode);
}

inline std::uint64_t pack(const Format& f, const Exact& e, const Rounding& r, Flags& fl) {
  return round_pack(f, e.sign, e.exponent, e.significand, e.sticky, r, fl);
}

}  // namespace rpsim::detail
