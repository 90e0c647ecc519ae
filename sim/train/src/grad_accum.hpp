// Internal to the trainer: gradient accumulation over the micro-batches of
// one optimizer step, in the accumulator format a framework keeps.
#pragma once

#include <cstdint>
#include <vector>

#include "rpsim/train/tensor.hpp"
#include "rpsim/train/trainer.hpp"

namespace rpsim::sim::train {

// The sample indices of a step's batch in micro-batches of `micro` samples,
// in order (the last one shorter when the batch is).
std::vector<std::vector<std::size_t>> micro_batches(const std::vector<std::size_t>& idx, std::size_t micro);

// DeepSpeed keeps one accumulation buffer per parameter in grad_accum_dtype:
// the first micro-batch's gradient cast into it, each later one added and
// the sum rounded (zero/stage_1_and_2.py: `param.grad_accum =
// param.grad.to(gradient_accumulation_dtype)`, then `grad_accum.add_(...)`;
// FP16_Optimizer's fp16 .grad accumulates the same way under autograd).
class GradAccumulator {
 public:
  // `format` null: binary64 sums (the FP64 shadow), no rounding.
  explicit GradAccumulator(const Format* format) : format_(format) {}
  // Adds each parameter's current gradient (one micro-batch's).
  void add(const std::vector<Parameter*>& params);
  // The sums into the parameters' gradients; grad_underflow becomes the mean
  // over the micro-batches of the entries flushed, those the accumulator's
  // roundings flushed included.
  void store(const std::vector<Parameter*>& params) const;

 private:
  const Format* format_;
  std::vector<Matrix> sums_;
  std::vector<std::int64_t> flushed_;
  std::int64_t added_ = 0;
};

}  // namespace rpsim::sim::train
