// The output projection of a language model, tied to its token embedding
// (GPT-2: logits = x wte^T, no bias).
#pragma once

#include <string>

#include "rpsim/train/layers/embedding.hpp"

namespace rpsim::sim::train {

// Follows the "lm_head" rule (F.linear under autocast). Owns no parameter:
// the weight is the Embedding named at construction, found by link(); its
// gradient is written here first (backward reaches the head before the
// lookup) and the Embedding adds its own.
class LMHead : public Layer {
 public:
  LMHead(std::string name, std::string embedding);
  std::string op() const override { return "lm_head"; }
  Tensor forward(const Tensor& x, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) override;
  std::unique_ptr<Layer> clone() const override { return std::make_unique<LMHead>(*this); }
  std::vector<std::pair<Eigen::Index, const Format*>> saved() const override;
  void link(std::vector<std::unique_ptr<Layer>>& layers) override;

 private:
  std::string embedding_;
  Parameter* weight_ = nullptr;  // the Embedding's token weight (vocabulary, width)
  Matrix xc_, wc_;
  const Format* x_format_ = nullptr;
  const Format* compute_ = nullptr;
};

}  // namespace rpsim::sim::train
