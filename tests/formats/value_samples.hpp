// Random finite values of a typed format, shared by the value-layer tests.
#pragma once

#include <cmath>
#include <cstdint>

#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/value.hpp"

namespace rpsim::test {

// A finite value of `Tag`'s format drawn from counter_random, spread over
// the binades around 1 (NaN/inf re-drawn).
template <class T>
T random_value(std::uint64_t i, int spread_binades = 6) {
  const Format& f = T::format();
  for (std::uint64_t k = 0;; ++k) {
    const std::uint64_t r = counter_random(12345, i, k);
    const double mant = 1.0 + double(r >> 11) * 0x1p-53;
    const int e = int((r >> 3) % std::uint64_t(2 * spread_binades + 1)) - spread_binades;
    const double v = (r & 1 ? -1.0 : 1.0) * std::ldexp(mant, e);
    const T t = T::from_bits(round_double(f, v));
    if (!isnan(t) && !isinf(t)) return t;
  }
}

}  // namespace rpsim::test
