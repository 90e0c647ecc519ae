// How one value rounds to a format: the facts that `rpsim explain` prints and
// `rpsim.explain` returns as a dict, computed once here so that neither front
// end copies the other.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

// A number as a user types it: decimal, hex float (0x1.8p-3), inf or nan,
// read as the nearest binary64 (strtod). Throws FormatError naming the text
// when it is not a number.
struct ParsedNumber {
  double value = 0;
  std::string note;  // why the binary64 differs visibly from the text (range), else empty
};
ParsedNumber parse_number(std::string_view text);

// Every binary64 is a finite decimal (sig * 2^e = sig * 5^-e / 10^-e when
// e < 0): all its digits, up to 767 significant ones for subnormals; "inf",
// "-nan".
std::string exact_decimal(double v);

// "inexact underflow", or "none (exact)" for no flag.
std::string flag_names(Flags flags);

struct Explanation {
  Format format;
  double value = 0;  // the binary64 that is rounded
  RoundingMode mode = RoundingMode::nearest_even;
  std::uint64_t seed = 0;  // sr: the one draw is counter_random(seed, 0, 0)
  int stochastic_bits = 32;

  std::uint64_t result = 0;  // encoding in `format`
  double result_value = 0;   // its exact value (NaN for a NaN)
  Flags flags = 0;
  // Finite and exactly a value of the format (RNE raises no flag).
  bool representable = false;

  // Finite value only: the nearest values strictly below and above it (the
  // results of rounding v -/+ an infinitesimal down/up), none where the
  // format ends.
  bool finite = false;
  std::optional<std::uint64_t> below, above;
  // When v lies strictly between two neighbours: their distance and where v
  // lies between them (0 = below, 1 = above).
  std::optional<double> spacing, position;

  // Finite value and finite result: result - value, relative to |value|
  // (value != 0), the ulp of the interval holding v (for a representable
  // value, the spacing of its binade) and the error in those ulps.
  std::optional<double> abs_error, rel_error, ulp, error_ulps;
  double unit_roundoff = 0;  // 2^-precision

  // sr strictly between neighbours: the probability of rounding away from
  // zero, the fractional position truncated to stochastic_bits bits as
  // round.cpp compares it.
  std::optional<double> sr_probability_away;

  // The result under every deterministic mode (nearest_even ... odd).
  std::array<std::pair<RoundingMode, std::uint64_t>, 6> all_modes{};
};

Explanation explain(const Format& f, double value, RoundingMode mode, std::uint64_t seed = 0);

}  // namespace rpsim
