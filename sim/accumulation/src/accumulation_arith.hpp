// Correctly rounded elementary operations of one accumulator (format +
// rounding mode), on doubles that hold values of that format. Fast native
// paths for binary32 and binary64 with round-to-nearest-even; every other case
// goes through the formats core (ops.hpp, round_pack). Internal to sim/.
#pragma once

#include <cstdint>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim::acc_detail {

class Arith {
 public:
  explicit Arith(const AccumulatorSpec& spec, std::uint64_t stream = 0);

  // Each result is the exact operation rounded once to the accumulator.
  // `index` picks the stochastic-rounding draw counter_random(seed, stream, index).
  double round(double x, std::uint64_t index) const;          // x any double
  double mul(double a, double b, std::uint64_t index) const;  // a, b any doubles
  double add(double x, double y, std::uint64_t index) const;  // x, y values of the format
  double sub(double x, double y, std::uint64_t index) const { return add(x, -y, index); }
  double fma(double a, double b, double s, std::uint64_t index) const;  // a*b + s

  const Format& format() const { return *fmt_; }

 private:
  enum class Path { f32, f64, generic };
  const Format* fmt_;
  Rounding rnd_;
  std::uint64_t seed_, stream_;
  Path path_;

  Rounding rounding_for(std::uint64_t index) const;
};

}  // namespace rpsim::sim::acc_detail
