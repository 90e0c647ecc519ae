// A residual connection around a stack of layers: y = x + body(x).
#pragma once

#include <string>
#include <vector>

#include "rpsim/train/layers/layer.hpp"

namespace rpsim::sim::train {

// The add follows the "add" rule (autocast: the wider of the two inputs'
// formats, PyTorch's type promotion). Backward hands dy to both branches,
// each cast to its input's format (autograd's engine casts a gradient to
// its input's dtype), and sums the two gradients of x in x's format (the
// engine's input buffer adds them in that dtype).
class Residual : public Layer {
 public:
  Residual(std::string name, std::vector<std::unique_ptr<Layer>> body);
  Residual(const Residual& other);
  std::string op() const override { return "add"; }
  Tensor forward(const Tensor& x, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override;
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Residual>(*this); }
  std::vector<std::pair<Eigen::Index, const Format*>> saved() const override;
  void link(std::vector<std::unique_ptr<Layer>>& layers) override;
  const std::vector<std::unique_ptr<Layer>>& body() const { return body_; }

 private:
  std::vector<std::unique_ptr<Layer>> body_;
  const Format* x_format_ = nullptr;
  const Format* body_format_ = nullptr;
};

}  // namespace rpsim::sim::train
