// What the fixed-point tests share besides the oracle: the rounding modes they
// sweep, the Q format named by a word/fraction pair, and a rounding whose
// stochastic bits are drawn per case from the counter generator (one seed per
// test file, so two files never draw the same bits).
#pragma once

#include <fmt/format.h>

#include <cstdint>

#include "fixed_point_oracle.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::fixed_cases {

constexpr RoundingMode kModes[] = {
    RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero, RoundingMode::down,
    RoundingMode::up,           RoundingMode::odd,          RoundingMode::stochastic};

inline const Format& format_of(const fixed_oracle::Q& q) {
  return format(fmt::format("q{}.{}", q.word, q.frac));  // not "q" + ...: GCC 12's -Wrestrict false positive
}

inline Rounding rounding_for(std::uint64_t seed, RoundingMode mode, std::uint64_t index) {
  Rounding r;
  r.mode = mode;
  r.random_bits = counter_random(seed, std::uint64_t(mode), index);
  return r;
}

}  // namespace rpsim::fixed_cases
