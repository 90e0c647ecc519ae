// The two paths behind convert() (ops.hpp), exposed so that tests can prove
// them bit-identical and benchmarks can time one against the other. Callers
// outside tests and experiments/bench use convert().
#pragma once

#include <cstdint>
#include <optional>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

// unpack() then round_pack(): every format pair, mode and option.
std::uint64_t convert_general(const Format& to, const Format& from, std::uint64_t bits, const Rounding& r,
                              Flags& fl);

// Whether convert_fast() takes this format pair and rounding for normal
// inputs: both IEEE-like (sign, zero, subnormals, infinity and IEEE NaN
// encoding), the destination no wider in fraction bits, the overflow policy
// infinity or saturate, a deterministic mode other than round-to-odd, no FTZ.
bool convert_fast_applies(const Format& to, const Format& from, const Rounding& r);

// Integer rounding of the significand in place for a normal finite input
// when convert_fast_applies(); std::nullopt for every other input (zero,
// subnormal, infinity, NaN), which convert() hands to convert_general().
std::optional<std::uint64_t> convert_fast(const Format& to, const Format& from, std::uint64_t bits,
                                          const Rounding& r, Flags& fl);

}  // namespace rpsim
