// Gradient accumulation over micro-batches (grad_accum.hpp).
#include "grad_accum.hpp"

#include <algorithm>

#include "rpsim/train/step_ops.hpp"

namespace rpsim::sim::train {

std::vector<std::vector<std::size_t>> micro_batches(const std::vector<std::size_t>& idx, std::size_t micro) {
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t start = 0; start < idx.size(); start += micro)
    out.emplace_back(idx.begin() + long(start), idx.begin() + long(std::min(idx.size(), start + micro)));
  return out;
}

void GradAccumulator::add(const std::vector<Parameter*>& params) {
  if (sums_.empty()) {
    sums_.resize(params.size());
    flushed_.assign(params.size(), 0);
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    flushed_[i] += p.grad_underflow;
    if (!format_) {
      sums_[i] = added_ == 0 ? p.grad : Matrix(sums_[i] + p.grad);
      continue;
    }
    // Rounded to nearest even, as the framework's add_ and .to() do (no
    // stochastic rounding scope is active between backward passes): the op
    // core's accumulate_gradient, which rpsim.torch's Trainer calls too.
    if (added_ == 0) sums_[i].resize(p.grad.rows(), p.grad.cols());
    flushed_[i] += accumulate_gradient({sums_[i].data(), std::size_t(sums_[i].size())},
                                       {p.grad.data(), std::size_t(p.grad.size())}, *format_, added_ == 0);
  }
  ++added_;
}

void GradAccumulator::store(const std::vector<Parameter*>& params) const {
  for (std::size_t i = 0; i < params.size() && i < sums_.size(); ++i) {
    params[i]->grad = sums_[i];
    params[i]->grad_underflow = added_ ? flushed_[i] / added_ : 0;
  }
}

}  // namespace rpsim::sim::train
