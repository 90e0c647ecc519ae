// The op core's arithmetic of a step between backward and the optimizer:
// unscaling the gradients by the loss scale, their L2 norm and the clipping
// factor, on flat arrays in rpsim train's element order (a Linear weight as
// nn.Linear holds it; an embedding table column by column). rpsim train's
// trainer and rpsim.torch's GradScaler and Trainer call these, so the
// arithmetic is written once.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rpsim/formats/format.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::sim::train {

// binary32(1 / scale): the factor every gradient is multiplied by
// (torch.cuda.amp.GradScaler.unscale_: the reciprocal of the float32 scale).
double unscale_factor(double scale);

struct Unscaled {
  std::int64_t flushed = 0;  // nonzero entries the product rounded to zero
  bool nonfinite = false;    // an inf or NaN among the results
};
// g = round(g * inv) to the gradients' format, in place: the product of two
// binary32 values is exact in binary64, so this is float32's own multiply
// for binary32 gradients, and one rounding to a narrower stored format.
// flushed (where not empty, g's size): flushed[i] = whether entry i was
// nonzero and its product rounded to zero (the Trainer's underflow masks,
// without a compare of every gradient before and after in torch).
Unscaled unscale(std::span<double> g, double inv, const Format& gradients, std::span<bool> flushed = {});
// The same on a binary32 carrier (a float32 tensor's gradient, read where it
// lies): each entry widened, unscaled and rounded as above, stored back as
// binary32 (exact for a gradients' format within binary32).
Unscaled unscale(std::span<float> g, double inv, const Format& gradients, std::span<bool> flushed = {});

// The entries of x that are inf or NaN (the telemetry's nonfinite
// fractions), on a binary64 or a binary32 carrier.
std::int64_t count_nonfinite(std::span<const double> x);
std::int64_t count_nonfinite(std::span<const float> x);

// The entries zero in `emulated` but nonzero and finite in `reference` (the
// telemetry's zero-vs-FP64 fractions: underflow and any other divergence
// together), on binary64 or binary32 carriers (instantiated for float and
// double, each side); the spans have one size (std::invalid_argument
// otherwise).
template <class E, class R>
std::int64_t count_zero_vs(std::span<const E> emulated, std::span<const R> reference);

// The entries with a nonzero gradient whose weight the update left as it was
// (`next` == `value`: the telemetry's update-stalled fractions; a NaN
// gradient counts as nonzero, a NaN weight as changed), on binary64 or
// binary32 carriers (the gradient's and the weights' each); one size
// (std::invalid_argument otherwise).
template <class G, class W>
std::int64_t count_stalled(std::span<const G> grad, std::span<const W> next, std::span<const W> value);

// The format clip_grad_norm computes in: the optimizer's arithmetic, at
// least binary32 (PyTorch's norm of half tensors runs in float).
const Format& norm_format(const PrecisionPolicy& policy);

// The L2 norm of all gradients as torch.nn.utils.clip_grad_norm_ on one
// device: each tensor's squares rounded to c and summed in order, the
// tensors' sums added in order, one rounding per operation, then the root.
double grad_norm(const std::vector<std::span<const double>>& grads, const Format& c);

// grad_norm one tensor at a time, on binary64 or binary32 carriers: the same
// bits as grad_norm of the tensors added in the same order.
class GradNorm {
 public:
  explicit GradNorm(const Format& c) : c_(&c) {}
  void add(std::span<const double> g);
  void add(std::span<const float> g);
  double value() const;

 private:
  template <class T>
  void add_tensor(std::span<const T> g);
  const Format* c_;
  double total_ = 0;
};

// clip_grad_norm_'s factor max_norm / (norm + 1e-6) in c (applied when below 1).
double clip_coefficient(double max_norm, double norm, const Format& c);

// g = round(g * coef) to the gradients' format, in place; returns the
// nonzero entries flushed to zero.
std::int64_t scale_gradient(std::span<double> g, double coef, const Format& gradients);

// Gradient accumulation over micro-batches (DeepSpeed's grad_accum buffer:
// zero/stage_1_and_2.py casts the first micro-batch's gradient into it and
// adds each later one, the sum rounded): sum = round(g) for the first,
// round(sum + g) after, to nearest even in f, in place (the sum of two
// values in binary64, then one rounding). Returns the nonzero entries the
// rounding flushed to zero.
std::int64_t accumulate_gradient(std::span<double> sum, std::span<const double> g, const Format& f,
                                 bool first);

}  // namespace rpsim::sim::train
