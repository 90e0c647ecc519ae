// Layers of a sequential network with hand-written reverse-mode derivatives.
// Every op reads the rule of its op class from the precision policy: inputs
// are cast to its compute format, matmuls accumulate under its accumulation
// model, results are rounded to its output format; the gradient of an input
// is returned in that input's format (as autograd's cast backward does).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rpsim/train/policy.hpp"
#include "rpsim/train/tensor.hpp"

namespace rpsim::sim::train {

struct StepContext {
  const PrecisionPolicy* policy = nullptr;
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
};

struct Parameter {
  std::string name;
  Matrix value;  // in policy.parameter_storage()
  Matrix grad;   // in policy.gradients
  // Entries of `grad` flushed to zero by the roundings that made it: to the
  // op's output and the gradient format in backward, then by unscaling and
  // clipping (see Tensor::underflow).
  std::int64_t grad_underflow = 0;
};

// Amax history of one tensor under delayed scaling (Transformer Engine).
struct AmaxHistory {
  std::vector<double> values;  // most recent last
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  const std::string& name() const { return name_; }
  virtual std::string op() const = 0;
  virtual Tensor forward(const Tensor& x, const StepContext& ctx) = 0;
  // Fills parameter gradients; returns the input gradient when asked for it.
  virtual Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) = 0;
  virtual std::vector<Parameter*> parameters() { return {}; }
  virtual std::unique_ptr<Layer> clone() const = 0;
  // Elements (for the last batch) and format of what forward saved for backward.
  virtual std::vector<std::pair<Eigen::Index, const Format*>> saved() const { return {}; }
  // Entries of the last output gradient (dy) that backward's cast of it to
  // the backward compute format (FP8: the quantisation) flushed to zero, in
  // dy's layout; empty when the layer casts nothing.
  virtual Mask gradient_cast_flushed() const { return Mask(); }

 private:
  std::string name_;
};

// y = x W + b with W stored (in, out). PyTorch's default init:
// U(-1/sqrt(in), 1/sqrt(in)) for W and b.
class Linear : public Layer {
 public:
  Linear(std::string name, Eigen::Index in, Eigen::Index out);
  std::string op() const override { return "linear"; }
  Tensor forward(const Tensor& x, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) override;
  std::vector<Parameter*> parameters() override { return {&weight, &bias}; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Linear>(*this); }
  std::vector<std::pair<Eigen::Index, const Format*>> saved() const override;
  Mask gradient_cast_flushed() const override { return dy_cast_flushed_; }

  Parameter weight, bias;
  // Shared by Linear and Conv2d (on im2col columns): the matmul core.
  Matrix core_forward(const Matrix& x, const Format& x_format, const StepContext& ctx);
  // Fills the parameter gradients (and their grad_underflow); returns the
  // input gradient in the op's output format, and its value before that
  // rounding in *dx_before_rounding when given.
  Matrix core_backward(const Matrix& dy, const StepContext& ctx, bool need_input_grad,
                       Matrix* dx_before_rounding = nullptr);

 private:
  std::string op_name_ = "linear";
  Matrix x_;        // input as given
  Matrix xc_, wc_;  // input and weight cast to the compute format (non-FP8 path)
  const Format* x_format_ = nullptr;
  const Format* saved_format_ = nullptr;
  double x_scale_ = 1, w_scale_ = 1;
  AmaxHistory x_history_, w_history_, dy_history_;
  Mask dy_cast_flushed_;

 protected:
  void set_op_name(std::string n) { op_name_ = std::move(n); }
};

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
};

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
  // Calls f(row, column, input feature) for every entry of the im2col matrix
  // that comes from the image (padding skipped): im2col and col2im alike.
  template <class F>
  void for_each_patch_entry(Eigen::Index batch, F&& f) const;

  int c_, oc_, h_, w_, k_, pad_, out_h_, out_w_;
  Eigen::Index batch_ = 0;
  const Format* x_format_ = nullptr;
};

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

// Losses: mean over the batch. backward(scale) returns d(scale * loss)/d
// logits in the logits' format: the loss scale enters here, in the loss's
// compute format, as loss.backward() on a scaled loss does.
class Loss {
 public:
  virtual ~Loss() = default;
  virtual std::string op() const = 0;
  virtual double forward(const Tensor& logits, const std::vector<int>& labels, const StepContext& ctx) = 0;
  virtual Tensor backward(double scale, const StepContext& ctx) = 0;
  virtual std::unique_ptr<Loss> clone() const = 0;
};

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

// FP8 helpers, exposed for tests. Per-tensor scale for the next use of a
// tensor: delayed scaling reads the amax history (before this tensor's amax
// is appended), current scaling this tensor's amax.
double fp8_scale(const Matrix& x, const Format& f, const Fp8Recipe& recipe, AmaxHistory& history);
// x * scale computed in binary32, clamped to the format's range and rounded.
Matrix fp8_quantize(const Matrix& x, const Format& f, double scale);
// OCP MX block scaling: blocks of `block` along `axis` (1: along a row,
// 0: down a column), shared E8M0 scale 2^(floor(log2 amax) - emax_elem);
// returns the dequantised values (exact in binary64).
Matrix mx_quantize(const Matrix& x, const Format& f, int block, int axis);

}  // namespace rpsim::sim::train
