// Losses: softmax cross-entropy and mean squared error.
#pragma once

#include <string>
#include <vector>

#include "rpsim/train/layers/layer.hpp"

namespace rpsim::sim::train {

// Softmax cross-entropy with integer labels; log-sum-exp with the row max
// subtracted, sums accumulated sequentially in the compute format.
class CrossEntropyLoss : public Loss {
 public:
  std::string op() const override { return "cross_entropy"; }
  double forward(const Tensor& logits, const std::vector<int>& labels, const StepContext& ctx) override;
  Tensor backward(double scale, const StepContext& ctx) override;
  std::unique_ptr<Loss> clone() const override { return std::make_unique<CrossEntropyLoss>(*this); }

 private:
  Matrix probabilities_;
  std::vector<int> labels_;
  const Format* logits_format_ = nullptr;
  const Format* compute_ = nullptr;
};

// Mean squared error against one-hot targets of the labels.
class MSELoss : public Loss {
 public:
  std::string op() const override { return "mse_loss"; }
  double forward(const Tensor& logits, const std::vector<int>& labels, const StepContext& ctx) override;
  Tensor backward(double scale, const StepContext& ctx) override;
  std::unique_ptr<Loss> clone() const override { return std::make_unique<MSELoss>(*this); }

 private:
  Matrix diff_;
  const Format* logits_format_ = nullptr;
  const Format* compute_ = nullptr;
};

}  // namespace rpsim::sim::train
