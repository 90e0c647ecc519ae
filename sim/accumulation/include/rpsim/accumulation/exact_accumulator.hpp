// Exact accumulation of sums of doubles and of products of two doubles: an
// integer super-accumulator (Kulisch) covering every binary64 product, so a
// dot product is rounded once, at the end. The ground truth for error
// measurement.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim {

class ExactAccumulator {
 public:
  // Adds x (finite) exactly. Non-finite values are remembered and make the
  // result NaN or the infinity, as IEEE addition would.
  void add(double x);
  // Adds x*y exactly (the 106-bit product, no rounding).
  void add_product(double x, double y);
  void clear();

  bool is_zero() const;
  // The sum rounded once to `fmt`; the encoding. An exact zero sum is +0
  // (-0 under RoundingMode::down), as IEEE 754 clause 6.3.
  std::uint64_t round(const Format& fmt, const Rounding& rnd, Flags& flags) const;
  // The sum rounded to binary64 under `mode`.
  double value(RoundingMode mode = RoundingMode::nearest_even) const;

  // Fixed-point layout: bit 0 of limb 0 has weight 2^kLowestExponent.
  static constexpr int kLowestExponent = -2240;  // below 2^-1074 * 2^-1074
  static constexpr int kLimbs = 68;              // up to 2^2112 (> 2^1024 * 2^1024 * 2^64 terms)

 private:
  using Limbs = std::array<std::uint64_t, kLimbs>;
  // Sign-magnitude halves: positive and negative terms in separate unsigned
  // accumulators, so carries rarely ripple (subtracted once, at the end).
  Limbs positive_{};
  Limbs negative_{};
  bool has_nan_ = false;
  bool has_pos_inf_ = false;
  bool has_neg_inf_ = false;
  bool any_term_ = false;
  bool all_terms_negative_zero_ = true;

  void add_magnitude(bool negative, std::uint64_t hi, std::uint64_t lo, int exponent);
};

// Exact sum_i a_i*b_i + c rounded once to binary64 (nearest even).
double exact_dot(std::span<const double> a, std::span<const double> b, double c = 0.0);

}  // namespace rpsim::sim
