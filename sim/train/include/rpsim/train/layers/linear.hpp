// Linear layer: y = x W + b, the matmul core Conv2d shares.
#pragma once

#include <string>

#include "rpsim/train/gemm_op.hpp"
#include "rpsim/train/layers/layer.hpp"

namespace rpsim::sim::train {

// y = x W + b with W stored (in, out). PyTorch's default init:
// U(-1/sqrt(in), 1/sqrt(in)) for W and b.
class Linear : public Layer {
 public:
  Linear(std::string name, Eigen::Index in, Eigen::Index out);
  std::string op() const override { return "linear"; }
  Tensor forward(const Tensor& x, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override { return {&weight, &bias}; }
  const Matrix* gemm_weight() const override { return &weight.value; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Linear>(*this); }
  std::vector<std::pair<Eigen::Index, const Format*>> saved() const override;
  Mask gradient_cast_flushed() const override { return dy_cast_flushed_; }
  std::vector<std::pair<std::string, const Fp8Stats*>> fp8_stats(const PrecisionPolicy& p) const override;

  Parameter weight, bias;
  // Shared by Linear and Conv2d (on im2col columns): the op core's GEMM op
  // on (x, weight, bias) under the rule of op_name_.
  Matrix core_forward(const Matrix& x, const Format& x_format, const StepContext& ctx);
  // The op's GemmOp::entrywise_cast for inputs of x_format (Conv2d casts its
  // input before im2col where it is one).
  const Format* entrywise_cast(const Format& x_format, const StepContext& ctx) {
    return op(ctx).entrywise_cast(x_format);
  }
  // Fills the parameter gradients (and their grad_underflow); returns the
  // input gradient in the op's output format, and its value before that
  // rounding in *dx_before_rounding when given.
  Matrix core_backward(const Matrix& dy, const StepContext& ctx, bool need_input_grad,
                       Matrix* dx_before_rounding = nullptr);
  // Under a block-scaled recipe, run this layer's GEMMs in bfloat16 instead
  // (Fp8Recipe::high_precision_last; set when the model is built).
  void set_high_precision(bool on) { high_precision_ = on; }
  bool high_precision() const { return high_precision_; }

 private:
  std::string op_name_ = "linear";
  GemmOp op_;
  GemmSaved saved_;
  Mask dy_cast_flushed_;
  const PrecisionPolicy* spec_policy_ = nullptr;  // the policy op_'s spec was resolved under
  bool high_precision_ = false;
  // op_ under the rule of op_name_ of ctx's policy, resolved once per policy.
  GemmOp& op(const StepContext& ctx);

 protected:
  void set_op_name(std::string n) { op_name_ = std::move(n); }
};

}  // namespace rpsim::sim::train
