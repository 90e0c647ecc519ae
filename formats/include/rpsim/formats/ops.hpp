// Correctly rounded arithmetic, conversion and comparison on encodings.
// One operation per source file, as in SoftFloat. Every format of the table
// (binary64 included) and every deterministic mode; stochastic rounding
// draws from Rounding::random_bits.
#pragma once

#include <cstdint>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

std::uint64_t add(const Format& f, std::uint64_t a, std::uint64_t b, const Rounding& r, Flags& fl);
std::uint64_t sub(const Format& f, std::uint64_t a, std::uint64_t b, const Rounding& r, Flags& fl);
std::uint64_t mul(const Format& f, std::uint64_t a, std::uint64_t b, const Rounding& r, Flags& fl);
std::uint64_t div(const Format& f, std::uint64_t a, std::uint64_t b, const Rounding& r, Flags& fl);
std::uint64_t sqrt(const Format& f, std::uint64_t a, const Rounding& r, Flags& fl);
// a * b + c with a single rounding.
std::uint64_t fma(const Format& f, std::uint64_t a, std::uint64_t b, std::uint64_t c, const Rounding& r,
                  Flags& fl);

std::uint64_t convert(const Format& to, const Format& from, std::uint64_t bits, const Rounding& r, Flags& fl);

// IEEE comparisons: the quiet ones raise invalid only for a signalling NaN,
// the signalling ones for any NaN.
bool eq(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl);
bool le(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl);
bool lt(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl);
bool eq_signaling(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl);
bool le_quiet(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl);
bool lt_quiet(const Format& f, std::uint64_t a, std::uint64_t b, Flags& fl);

}  // namespace rpsim
