// Token and position embeddings of a language model (GPT-2's wte and wpe).
#pragma once

#include <string>

#include "rpsim/train/layers/layer.hpp"

namespace rpsim::sim::train {

// Input rows are windows of token ids (exact integers in binary64, one per
// column); output row r * T + t is wte[id(r, t)] + wpe[t], added in the
// "embedding" rule's formats (autocast: the weights' own, as
// torch.nn.Embedding is on no autocast list). With a tied output
// projection (LMHead) the token embedding's gradient is the head's plus
// the lookup's, added in the gradient format as autograd accumulates it.
class Embedding : public Layer {
 public:
  Embedding(std::string name, Eigen::Index vocabulary, Eigen::Index context, Eigen::Index width);
  std::string op() const override { return "embedding"; }
  Tensor forward(const Tensor& x, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override { return {&token, &position}; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Embedding>(*this); }
  // Set when an LMHead shares `token`: backward then adds to the gradient
  // the head left there instead of replacing it.
  void set_tied(bool tied) { tied_ = tied; }

  Parameter token, position;  // (vocabulary, width), (context, width)

 private:
  std::vector<int> ids_;
  Eigen::Index rows_ = 0, positions_ = 0;
  const Format* x_format_ = nullptr;
  bool tied_ = false;
};

}  // namespace rpsim::sim::train
