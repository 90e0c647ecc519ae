// Layers of a sequential network with hand-written reverse-mode derivatives.
// Every op reads the rule of its op class from the precision policy: inputs
// are cast to its compute format, matmuls accumulate under its accumulation
// model, results are rounded to its output format; the gradient of an input
// is returned in that input's format (as autograd's cast backward does).
//
// The interfaces: a layer (forward, backward, parameters) and a loss.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
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
  // Whether the optimizer's weight decay applies (nanoGPT decays only the
  // matrices, not biases and LayerNorm gains).
  bool decay = true;
  // Entries with a nonzero gradient whose stored value the last optimizer
  // step left unchanged: the update rounded away in the parameter format
  // (Gupta et al. 2015's stall under round to nearest). 0 before any step
  // and after a skipped one.
  std::int64_t update_stalled = 0;
};

// One tensor's delayed-scaling state (Transformer Engine's amax history,
// scale and scale_inv), made on the tensor's first quantisation.
struct Fp8ScaleState {
  std::optional<sim::DelayedScaling> delayed;
};

// What the FP8 quantisations of one tensor saw in the last step (the FP8
// columns of steps.csv). Per-tensor scaling records the one quantisation
// whose scale it sets (backward reuses x's and w's scales on the same
// values, so the counts would repeat); MX adds up every quantisation of the
// tensor in the step, since each blocking differs.
struct Fp8Stats {
  double amax = 0;  // max |x| of the tensor as given
  // Per-tensor: the scale used (x * scale is quantised). MX: the smallest
  // and largest block scale 1 / 2^shared (NaN when no block had a nonzero
  // finite amax).
  double scale_min = NAN, scale_max = NAN;
  std::int64_t entries = 0;    // entries quantised (MX: summed over the uses)
  std::int64_t saturated = 0;  // |x * scale| clamped to the format's max finite
  std::int64_t flushed = 0;    // nonzero entries that quantised to zero
  // Widens [scale_min, scale_max] to hold the block scale `m` (a multiplier, 1 / X).
  void widen(double m) {
    scale_min = std::isnan(scale_min) ? m : std::min(scale_min, m);
    scale_max = std::isnan(scale_max) ? m : std::max(scale_max, m);
  }
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) { constructed_.fetch_add(1); }
  // Layers made by this constructor in this process (a clone is a copy and
  // does not count): how tests show that the run plan builds no network and
  // the trainer one.
  static std::uint64_t constructed() { return constructed_.load(); }
  virtual ~Layer() = default;
  const std::string& name() const { return name_; }
  virtual std::string op() const = 0;
  virtual Tensor forward(const Tensor& x, const StepContext& ctx) = 0;
  // Fills parameter gradients; returns the input gradient when asked for it.
  virtual Tensor backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) = 0;
  virtual std::vector<Parameter*> parameters() { return {}; }
  // The weight W of the layer's GEMM (y = x W, so dx = dy W^T: dot products
  // of W.cols() terms), which per-layer adaptive loss scaling reads; nullptr
  // for a layer without one.
  virtual const Matrix* gemm_weight() const { return nullptr; }
  virtual std::unique_ptr<Layer> clone() const = 0;
  // Elements (for the last batch) and format of what forward saved for backward.
  virtual std::vector<std::pair<Eigen::Index, const Format*>> saved() const { return {}; }
  // Entries of the last output gradient (dy) that backward's cast of it to
  // the backward compute format (FP8: the quantisation) flushed to zero, in
  // dy's layout; empty when the layer casts nothing.
  virtual Mask gradient_cast_flushed() const { return Mask(); }
  // The tensors this layer quantises to FP8 under `policy`, named as in
  // steps.csv ("x", "w", "dy"), with what they saw in the last step; empty
  // when it quantises none. The list depends only on the policy, so the
  // telemetry's columns are fixed before the first step.
  virtual std::vector<std::pair<std::string, const Fp8Stats*>> fp8_stats(const PrecisionPolicy&) const {
    return {};
  }
  // Resolves references to other layers of the model (a tied weight) after
  // the model is built or cloned.
  virtual void link(std::vector<std::unique_ptr<Layer>>&) {}

 private:
  std::string name_;
  static inline std::atomic<std::uint64_t> constructed_{0};
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

}  // namespace rpsim::sim::train
