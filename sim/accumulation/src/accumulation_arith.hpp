// Correctly rounded elementary operations of one accumulator (format +
// rounding mode), on doubles that hold values of that format: the shared
// arithmetic of accumulator_ops.hpp (the CUDA backend's too), and the fused
// multiply-add, whose general case needs the exact accumulator. Internal to
// sim/.
#pragma once

#include <cstdint>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/accumulator_ops.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim::acc_detail {

class Arith {
 public:
  explicit Arith(const AccumulatorSpec& spec, std::uint64_t stream = 0)
      : fmt_(&spec.format), ops_(accumulator_ops(spec, stream)) {}

  // Each result is the exact operation rounded once to the accumulator.
  // `index` picks the stochastic-rounding draw counter_random(seed, stream, index).
  double round(double x, std::uint64_t index) const { return acc_detail::round(ops_, x, index); }
  double mul(double a, double b, std::uint64_t index) const { return acc_detail::mul(ops_, a, b, index); }
  double add(double x, double y, std::uint64_t index) const { return acc_detail::add(ops_, x, y, index); }
  double sub(double x, double y, std::uint64_t index) const { return add(x, -y, index); }
  double fma(double a, double b, double s, std::uint64_t index) const;  // a*b + s

  const Format& format() const { return *fmt_; }
  const AccumulatorOps& ops() const { return ops_; }

 private:
  const Format* fmt_;
  AccumulatorOps ops_;
};

}  // namespace rpsim::sim::acc_detail
