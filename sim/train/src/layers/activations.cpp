// ReLU and GELU.
#include <cmath>

#include "common.hpp"

namespace rpsim::sim::train {
using namespace detail;

Tensor ReLU::forward(const Tensor& x, const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("relu"), *x.format);
  x_ = Tensor{rounded(*f.compute, x.values), f.compute};
  Matrix y = x_.values.cwiseMax(0.0);
  round_in_place(*f.output, y);
  return Tensor{std::move(y), f.output};
}

Tensor ReLU::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  if (!need_input_grad) return Tensor{Matrix(), x_.format};
  const Formats f = resolve(ctx.policy->rule("relu"), *x_.format);
  // Masking first changes nothing (rounding keeps zeros) and leaves the
  // masked-out zeros out of the underflow count.
  const Matrix raw = (x_.values.array() > 0).select(dy.values, 0.0);
  Matrix dx = rounded(*f.backward, raw);
  round_in_place(*x_.format, dx);
  Mask flushed = flushed_mask(raw, dx);
  if (dy.flushed.size()) flushed = flushed || (dy.flushed && x_.values.array() > 0);
  return Tensor{std::move(dx), x_.format, std::move(flushed)};
}

std::vector<std::pair<Eigen::Index, const Format*>> ReLU::saved() const {
  return {{x_.values.size(), x_.format}};
}

namespace {
// x Phi(x) and its derivative Phi(x) + x phi(x), given e = erf(x / sqrt 2)
// (computed once in forward: erf was a tenth of a small GPT's step).
double gelu(double x, double e) {
  return 0.5 * x * (1.0 + e);
}
double gelu_derivative(double x, double e) {
  constexpr double inv_sqrt_2pi = 0.3989422804014327;
  return 0.5 * (1.0 + e) + x * inv_sqrt_2pi * std::exp(-0.5 * x * x);
}
}  // namespace

Tensor GELU::forward(const Tensor& x, const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("gelu"), *x.format);
  x_ = Tensor{rounded(*f.compute, x.values), f.compute};
  erf_ = x_.values.unaryExpr([](double v) { return std::erf(v / std::sqrt(2.0)); });
  Matrix y = x_.values.binaryExpr(erf_, [](double v, double e) { return gelu(v, e); });
  round_in_place(*f.compute, y);
  round_in_place(*f.output, y);
  return Tensor{std::move(y), f.output};
}

Tensor GELU::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  if (!need_input_grad) return Tensor{Matrix(), x_.format};
  const Formats f = resolve(ctx.policy->rule("gelu"), *x_.format);
  Matrix d = x_.values.binaryExpr(erf_, [](double v, double e) { return gelu_derivative(v, e); });
  round_in_place(*f.backward, d);
  const Matrix raw = rounded(*f.backward, dy.values).cwiseProduct(d);
  Matrix dx = rounded(*f.backward, raw);
  round_in_place(*x_.format, dx);
  Mask flushed = flushed_mask(raw, dx);
  if (dy.flushed.size()) flushed = flushed || dy.flushed;
  return Tensor{std::move(dx), x_.format, std::move(flushed)};
}

std::vector<std::pair<Eigen::Index, const Format*>> GELU::saved() const {
  return {{x_.values.size(), x_.format}};
}

}  // namespace rpsim::sim::train
