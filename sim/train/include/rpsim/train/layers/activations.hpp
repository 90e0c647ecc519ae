// Elementwise activations: ReLU and GELU.
#pragma once

#include <string>

#include "rpsim/train/layers/layer.hpp"

namespace rpsim::sim::train {

class ReLU : public Layer {
 public:
  using Layer::Layer;
  std::string op() const override { return "relu"; }
  Tensor forward(const Tensor& x, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) override;
  std::unique_ptr<Layer> clone() const override { return std::make_unique<ReLU>(*this); }
  std::vector<std::pair<Eigen::Index, const Format*>> saved() const override;

 private:
  Tensor x_;
};

// GELU with the exact erf form; the function is evaluated in binary64 and
// rounded once to the compute format (as CUDA kernels do in their opmath).
class GELU : public Layer {
 public:
  using Layer::Layer;
  std::string op() const override { return "gelu"; }
  Tensor forward(const Tensor& x, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) override;
  std::unique_ptr<Layer> clone() const override { return std::make_unique<GELU>(*this); }
  std::vector<std::pair<Eigen::Index, const Format*>> saved() const override;

 private:
  Tensor x_;
  Matrix erf_;  // erf(x / sqrt 2) of forward, which backward's derivative needs again
};

}  // namespace rpsim::sim::train
