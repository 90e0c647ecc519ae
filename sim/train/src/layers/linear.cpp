// Linear: the op core's GEMM op on (x, W, b), shared with Conv2d.
#include <utility>

#include "common.hpp"

namespace rpsim::sim::train {
using namespace detail;

Linear::Linear(std::string name, Eigen::Index in, Eigen::Index out) : Layer(std::move(name)) {
  weight.name = this->name() + ".weight";
  bias.name = this->name() + ".bias";
  weight.value = Matrix::Zero(in, out);
  bias.value = Matrix::Zero(1, out);
}

GemmOp& Linear::op(const StepContext& ctx) {
  if (spec_policy_ != ctx.policy) {
    op_ = GemmOp(GemmSpec::of(ctx.policy->rule(op_name_), *ctx.policy, high_precision_));
    spec_policy_ = ctx.policy;
  }
  op_.set_high_precision(high_precision_);
  return op_;
}

Matrix Linear::core_forward(const Matrix& x, const Format& x_format, const StepContext& ctx) {
  return op(ctx).forward(x, x_format, weight.value, &bias.value, GemmKeys::of_layer(name(), ctx), saved_);
}

Matrix Linear::core_backward(const Matrix& dy, const StepContext& ctx, bool need_input_grad,
                             Matrix* dx_before_rounding) {
  // The weight gradient leaves the op in its output format and is stored in
  // the policy's gradient format (autocast: fp16 grad cast back to fp32).
  GemmGrads g = op(ctx).backward(saved_, dy, need_input_grad, true, true, GemmKeys::of_layer(name(), ctx),
                                 ctx.policy->gradients);
  dy_cast_flushed_ = std::move(g.dy_cast_flushed);
  weight.grad_underflow = count_flushed(g.db_raw, g.db);
  weight.grad = std::move(g.db);
  bias.grad_underflow = count_flushed(g.dbias_raw, g.dbias);
  bias.grad = std::move(g.dbias);
  if (need_input_grad && dx_before_rounding) *dx_before_rounding = std::move(g.da_raw);
  return std::move(g.da);
}

Tensor Linear::forward(const Tensor& x, const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("linear"), *x.format);
  return Tensor{core_forward(x.values, *x.format, ctx), f.output};
}

Tensor Linear::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  const Format* x_format = saved_.a_format;
  Matrix raw;
  Matrix dx = core_backward(dy.values, ctx, need_input_grad, &raw);
  if (!need_input_grad) return Tensor{Matrix(), x_format};
  round_in_place(*x_format, dx);
  Mask flushed = flushed_mask(raw, dx);
  return Tensor{std::move(dx), x_format, std::move(flushed)};
}

std::vector<std::pair<std::string, const Fp8Stats*>> Linear::fp8_stats(const PrecisionPolicy& p) const {
  // From the policy alone (the columns are fixed before the first step).
  const GemmSpec spec = GemmSpec::of(p.rule(op_name_), p, high_precision_);
  if (!spec.per_tensor_fp8() && !spec.block_scaled()) return {};
  return op_.fp8_records();
}

std::vector<std::pair<Eigen::Index, const Format*>> Linear::saved() const {
  // What autograd keeps: the input cast to the compute format (FP8: its
  // quantised copy, one byte per element).
  return {{saved_.a_size, saved_.saved_format}};
}

}  // namespace rpsim::sim::train
