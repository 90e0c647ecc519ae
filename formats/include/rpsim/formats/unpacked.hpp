// The decoded form of an encoding, shared by the operations. Internal to
// formats/ but public so that sim/ can build exact intermediates.
#pragma once

#include <bit>
#include <cstdint>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/scalar_core.hpp"

namespace rpsim {

// Class and Unpacked are the scalar core's (scalar_core.hpp).
Unpacked unpack(const Format& fmt, std::uint64_t bits, bool flush_subnormals = false);

// x = mantissa * 2^exponent with an integer mantissa below 2^53, for a finite
// non-zero binary64 (the hot-path form of unpack for accumulators).
inline void split_binary64(double x, std::uint64_t& mantissa, int& exponent) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const int field = static_cast<int>((bits >> 52) & 0x7ff);
  mantissa = bits & ((1ull << 52) - 1);
  if (field == 0) {
    exponent = -1074;
  } else {
    mantissa |= 1ull << 52;
    exponent = field - 1075;
  }
}
bool is_subnormal(const Format& fmt, std::uint64_t bits);
bool is_nan(const Format& fmt, std::uint64_t bits);
bool is_signaling_nan(const Format& fmt, std::uint64_t bits);

// NaN results, by policy (nan.cpp).
std::uint64_t default_nan(const Format& fmt, NanPolicy policy);
// A NaN of `fmt` carrying the sign and payload of a decoded NaN (conversions).
std::uint64_t nan_from(const Format& fmt, const Unpacked& nan, NanPolicy policy);
// The result of an operation with NaN operands (at least one of a, b is NaN;
// both are encodings of `fmt`); raises invalid for a signalling operand.
std::uint64_t propagate_nan(const Format& fmt, std::uint64_t a, std::uint64_t b, NanPolicy policy,
                            Flags& flags);

}  // namespace rpsim
