// Multi-head causal self-attention between the query/key/value projection
// and the output projection (GPT-2's c_attn and c_proj are Linear layers
// around it), written as nanoGPT's explicit path does it:
//   att = (q @ k^T) * (1 / sqrt(head_dim)); masked_fill(future, -inf);
//   softmax(att); y = att @ v.
#pragma once

#include <string>
#include <vector>

#include "rpsim/train/layers/layer.hpp"

namespace rpsim::sim::train {

// The attention's softmax as kernels of their own (rpsim.torch's F.softmax
// runs them too): each row over the entries `keep` marks (the causal mask
// keeps j <= i), the scores rounded to c (the "softmax" rule's compute
// format) first, then max, exp, sum and divide one rounding to c per
// operation; entries not kept are 0. The backward, ds = p * (dp - sum(dp *
// p)), rounds dp to c first, one rounding per operation as well.
Mask causal_mask(Eigen::Index t);
Matrix softmax_rows(const Matrix& scores, const Format& c, const Mask& keep);
Matrix softmax_rows_backward(const Matrix& p, const Matrix& dp, const Format& c, const Mask& keep);

// Input rows r * T + t (T = context: whole windows only) hold [q | k | v] of token t of window r (3 * width
// columns), output rows the heads' results side by side (width columns).
// Both products follow the "matmul" rule (autocast: the low format), the
// softmax the "softmax" rule (autocast: binary32, its max subtracted first);
// the scale multiplies in the scores' format (opmath, then rounded), so
// under autocast p = softmax(s) is binary32 and cast to the low format for
// p @ v, as autocast casts bmm's inputs.
class CausalSelfAttention : public Layer {
 public:
  CausalSelfAttention(std::string name, int context, int heads);
  std::string op() const override { return "softmax"; }
  Tensor forward(const Tensor& x, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) override;
  std::unique_ptr<Layer> clone() const override { return std::make_unique<CausalSelfAttention>(*this); }
  std::vector<std::pair<Eigen::Index, const Format*>> saved() const override;

 private:
  struct Head {             // what backward needs of one (window, head)
    Matrix q, k, p, pc, v;  // q, k, v cast to the matmul format; p softmax output; pc its cast
  };
  void forward_head(const Matrix& x, Eigen::Index r, int h, const StepContext& ctx, Matrix& y);
  void backward_head(const Matrix& dy, Eigen::Index r, int h, const StepContext& ctx, Matrix& dx,
                     Matrix& raw);

  int context_, heads_;
  Eigen::Index t_ = 0, width_ = 0, head_dim_ = 0;
  std::vector<Head> saved_;
  const Format* x_format_ = nullptr;
  const Format* scores_format_ = nullptr;  // q k^T's output format
  const Format* probs_format_ = nullptr;   // the softmax's output format
  const Format* y_format_ = nullptr;       // p v's output format
};

}  // namespace rpsim::sim::train
