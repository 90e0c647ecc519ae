// Text forms of encodings: decimal, hex bits and sign/exponent/fraction fields.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "rpsim/formats/format.hpp"

namespace rpsim {

std::string hex_bits(const Format& f, std::uint64_t bits);       // "0x3C00"
std::string binary_fields(const Format& f, std::uint64_t bits);  // "0 01111 0000000000"
// "normal", "subnormal", "zero", "infinity", "NaN" (quiet/signalling)
std::string classify(const Format& f, std::uint64_t bits);
// Shortest decimal that reads back as the exact value (every value of every
// format is a binary64), "inf", "-nan".
std::string decimal(const Format& f, std::uint64_t bits);

// An encoding together with its format, for fmt: "{}" decimal, "{:x}" hex,
// "{:b}" fields.
struct Encoded {
  const Format* format;
  std::uint64_t bits;
};

}  // namespace rpsim

template <>
struct fmt::formatter<rpsim::Encoded> {
  char presentation = 'd';
  constexpr auto parse(format_parse_context& ctx) {
    auto it = ctx.begin();
    if (it != ctx.end() && (*it == 'x' || *it == 'b' || *it == 'd')) presentation = *it++;
    return it;
  }
  template <typename Ctx>
  auto format(const rpsim::Encoded& e, Ctx& ctx) const {
    std::string s = presentation == 'x'   ? rpsim::hex_bits(*e.format, e.bits)
                    : presentation == 'b' ? rpsim::binary_fields(*e.format, e.bits)
                                          : rpsim::decimal(*e.format, e.bits);
    return fmt::format_to(ctx.out(), "{}", s);
  }
};
