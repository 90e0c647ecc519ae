// Gradient accumulation over micro-batches (grad_accum.hpp).
#include "grad_accum.hpp"

#include <algorithm>

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
    Matrix sum = added_ == 0 ? p.grad : Matrix(sums_[i] + p.grad);
    flushed_[i] += p.grad_underflow;
    if (format_) {
      // Round to nearest even, as the framework's add_ and .to() do (no
      // stochastic rounding scope is active between backward passes).
      Matrix r = rounded(*format_, sum, RoundingMode::nearest_even);
      flushed_[i] += count_flushed(sum, r);
      sum = std::move(r);
    }
    sums_[i] = std::move(sum);
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
