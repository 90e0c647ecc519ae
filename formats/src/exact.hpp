// Exact intermediates shared by the arithmetic files (internal to formats/).
#pragma once

#include <bit>
#include <cstdint>

#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim::detail {

struct Exact {
  bool sign = false;
  std::int64_t exponent = 0;
  u128 significand = 0;  // 0 means an exact zero
  bool sticky = false;
};

inline int msb_index(u128 x) {
  const std::uint64_t hi = std::uint64_t(x >> 64);
  if (hi) return 127 - std::countl_zero(hi);
  return 63 - std::countl_zero(std::uint64_t(x));
}

inline Exact exact_of(const Unpacked& u) {
  return {u.sign, u.exponent, u.significand, false};
}

// x + y exactly, except that bits more than ~70 places below the leading bit of
// the larger operand fold into sticky, which cannot change any rounding of a
// format up to binary64. Zero signs follow IEEE 754 6.3.
Exact exact_sum(Exact x, Exact y, RoundingMode mode);

inline std::uint64_t pack(const Format& f, const Exact& e, const Rounding& r, Flags& fl) {
  return round_pack(f, e.sign, e.exponent, e.significand, e.sticky, r, fl);
}

}  // namespace rpsim::detail
