// The decoded form of an encoding, shared by the operations. Internal to
// formats/ but public so that sim/ can build exact intermediates.
#pragma once

#include <cstdint>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

enum class Class : std::uint8_t { zero, finite, infinity, quiet_nan, signaling_nan };

struct Unpacked {
  Class cls = Class::zero;
  bool sign = false;
  std::int64_t exponent = 0;  // value = significand * 2^exponent
  std::uint64_t significand = 0;
  // NaN payload aligned to the top of 64 bits, quiet bit excluded, so that it
  // can move between formats of any width (SoftFloat's "common NaN").
  std::uint64_t payload = 0;

  bool is_nan() const { return cls == Class::quiet_nan || cls == Class::signaling_nan; }
};

Unpacked unpack(const Format& fmt, std::uint64_t bits, bool flush_subnormals = false);
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
