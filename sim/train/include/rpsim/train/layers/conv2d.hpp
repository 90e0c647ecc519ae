// 2-D convolution on the Linear core.
#pragma once

#include <string>

#include "rpsim/train/conv_op.hpp"
#include "rpsim/train/layers/linear.hpp"

namespace rpsim::sim::train {

// 2-D convolution, input rows are images flattened (C, H, W); im2col then
// the Linear matmul core, so it follows the "conv2d" rule of the policy.
// Overlapping patches are summed in binary64 in col2im and rounded once.
class Conv2d : public Linear {
 public:
  Conv2d(std::string name, int in_channels, int out_channels, int height, int width, int kernel, int padding);
  std::string op() const override { return "conv2d"; }
  Tensor forward(const Tensor& x, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) override;
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Conv2d>(*this); }
  Mask gradient_cast_flushed() const override;
  int out_height() const { return out_h_; }
  int out_width() const { return out_w_; }

 private:
  ConvGeometry geometry() const;  // the op core's im2col and col2im take it
  int c_, oc_, h_, w_, k_, pad_, out_h_, out_w_;
  Eigen::Index batch_ = 0;
  const Format* x_format_ = nullptr;
};

}  // namespace rpsim::sim::train
