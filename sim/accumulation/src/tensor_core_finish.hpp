// The final normalisation of a block FMA step: the exact fixed-point sum
// rounded to the output format (or the narrower accumulator of FP8 paths).
// The arithmetic is tensor_core_step.hpp's (shared with the CUDA backend);
// Finisher is the model's TcStep with the model beside it. Internal to sim/.
#pragma once

#include <cstdint>

#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"
#include "tensor_core_kernel.hpp"

namespace rpsim::sim::tc_detail {

struct Finisher : TcStep {
  explicit Finisher(const TensorCoreModel& m) : TcStep(tc_step_of(m)), model(&m) {}

  const TensorCoreModel* model;

  // sum * 2^exponent (sum != 0) rounded as the hardware does.
  double finish(std::int64_t sum, int exponent) const { return tc_detail::finish(*this, sum, exponent); }
  double finish_slow(bool negative, std::int64_t magnitude, int exponent) const {
    return tc_detail::finish_slow(*this, negative, magnitude, exponent);
  }
  // C added to an instruction's result x (c_join = after_products): an IEEE
  // addition in the output format, rounded to nearest even. x and c are
  // values of the output format.
  double add_after(double x, double c) const { return tc_detail::add_after(*this, x, c); }
};

}  // namespace rpsim::sim::tc_detail
