// 2-D max pooling.
#pragma once

#include <string>
#include <vector>

#include "rpsim/train/layers/layer.hpp"

namespace rpsim::sim::train {

// Max pooling with window = stride = `size`; exact in every format.
class MaxPool2d : public Layer {
 public:
  MaxPool2d(std::string name, int channels, int height, int width, int size);
  std::string op() const override { return "max_pool2d"; }
  Tensor forward(const Tensor& x, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) override;
  std::unique_ptr<Layer> clone() const override { return std::make_unique<MaxPool2d>(*this); }

 private:
  int c_, h_, w_, s_;
  std::vector<Eigen::Index> argmax_;
  Eigen::Index in_cols_ = 0;
  const Format* x_format_ = nullptr;
};

}  // namespace rpsim::sim::train
