// Correctly rounded accumulator operations (see accumulation_arith.hpp).
#include "accumulation_arith.hpp"

#include <cmath>

#include "rpsim/accumulation/exact_accumulator.hpp"

namespace rpsim::sim {

AccumulatorOps accumulator_ops(const AccumulatorSpec& spec, std::uint64_t stream) {
  AccumulatorOps o;
  o.format = spec.format;
  o.mode = spec.rounding;
  o.seed = spec.seed;
  o.stream = stream;
  const bool rne = spec.rounding == RoundingMode::nearest_even;
  if (rne && spec.format == formats::binary32())
    o.path = AccumulatorPath::f32;
  else if (rne && spec.format == formats::binary64())
    o.path = AccumulatorPath::f64;
  else
    o.path = AccumulatorPath::generic;
  return o;
}

namespace acc_detail {

double Arith::fma(double a, double b, double s, std::uint64_t index) const {
  if (ops_.path == AccumulatorPath::f64) return std::fma(a, b, s);
  if (ops_.path == AccumulatorPath::f32) {
    const float fa = static_cast<float>(a), fb = static_cast<float>(b), fs = static_cast<float>(s);
    if (fa == a && fb == b && fs == s) return static_cast<double>(std::fma(fa, fb, fs));
  }
  // General case: the exact a*b + s, rounded once.
  if (!std::isfinite(a) || !std::isfinite(b) || !std::isfinite(s)) return round(a * b + s, index);
  ExactAccumulator acc;
  acc.add_product(a, b);
  acc.add(s);
  Rounding r;
  r.mode = ops_.mode;
  if (r.mode == RoundingMode::stochastic) r.random_bits = counter_random(ops_.seed, ops_.stream, index);
  Flags f = 0;
  return to_double(*fmt_, acc.round(*fmt_, r, f));
}

}  // namespace acc_detail
}  // namespace rpsim::sim
