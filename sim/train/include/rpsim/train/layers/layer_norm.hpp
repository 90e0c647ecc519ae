// Layer normalisation.
#pragma once

#include <string>

#include "rpsim/train/layers/layer.hpp"

namespace rpsim::sim::train {

// Layer normalisation over the features of each sample (gamma 1, beta 0).
// Forward rounds every intermediate (mean, centred values, variance,
// reciprocal standard deviation, normalised values, affine output) to the
// compute format; backward is evaluated in binary64 and rounded once.
class LayerNorm : public Layer {
 public:
  LayerNorm(std::string name, Eigen::Index features, double eps = 1e-5);
  std::string op() const override { return "layer_norm"; }
  Tensor forward(const Tensor& x, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override { return {&gamma, &beta}; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<LayerNorm>(*this); }
  std::vector<std::pair<Eigen::Index, const Format*>> saved() const override;

  Parameter gamma, beta;

 private:
  double eps_;
  Matrix xhat_;
  Eigen::VectorXd rstd_;
  const Format* x_format_ = nullptr;
  const Format* compute_ = nullptr;
};

}  // namespace rpsim::sim::train
