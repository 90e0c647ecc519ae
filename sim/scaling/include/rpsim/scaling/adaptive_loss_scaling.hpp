// Per-layer adaptive loss scaling, Zhao, Vogel, Ahmed, Luk, "Reducing
// Underflow in Mixed Precision Training by Gradient Scaling" (IJCAI 2020;
// arXiv 1910.12385 "Adaptive Loss Scaling for Mixed Precision Training"),
// as its reference code computes it: kumasento/gradient-scaling,
// ada_loss/core.py AdaLoss.get_loss_scale and
// ada_loss/chainer_impl/ada_loss.py AdaLossChainer
// (get_loss_scale_by_approx_range, bound_loss_scale_by_heuristics, rescaling).
//
// How a trainer uses it. Backward runs from the last layer to the first; the
// gradient arriving at a layer, g = dL/dy, carries the product of the scales
// chosen so far (`carried`, 1 at the loss, or a global loss scale). For each
// layer with weight W (y = x W^T, so dL/dx = g W):
//
//   AdaptiveLayerInput in{moments_of(g), moments_of(W), fan_in};
//   double s = ada.layer_scale(in, carried);   // this layer's own factor
//   dx = (g W) * s          -> passed down, carrying carried * s
//   dW = g^T x / carried    -> the weight gradient, unscaled by what g carries
//
// fan_in is the length of the dot products in g W (the number of output
// features of a linear layer, out_channels * kh * kw for a convolution; what
// the Chainer code calls get_fan_in(W) = W.shape[0] (* kh * kw)).
//
// Where two branches meet (a residual sum), their gradients carry different
// scales; rescale_target picks the common one (AdaLossChainer.rescaling).
#pragma once

#include <cstdint>
#include <span>

namespace rpsim::sim {

// Mean, population standard deviation (numpy .std(), ddof=0), min and max of
// a tensor, the statistics the method needs.
struct TensorMoments {
  double mean = 0, std = 0, min = 0, max = 0;
};
TensorMoments moments_of(std::span<const float> values);

struct AdaptiveLayerInput {
  TensorMoments grad;    // g = dL/dy as it arrives, already carrying the accumulated scale
  TensorMoments weight;  // W
  std::int64_t fan_in = 1;
};

// Defaults of AdaLoss.__init__ for dtype="float16".
struct AdaptiveLossScalingConfig {
  double u_min = 6.0e-8;  // get_u_min("float16"): ~ the smallest fp16 subnormal
  double u_max = 65504;   // get_u_max("float16")
  // n_uf_threshold: the fraction of products g_i * W_j (modelled as a
  // zero-mean Gaussian of the product's second moment) allowed below u_min.
  double underflow_fraction = 1e-3;
  bool bound_by_fan_in = true;      // u_max /= fan_in, so a dot product cannot overflow
  bool use_bound = true;            // bound_loss_scale_by_heuristics
  double scale_upper_bound = 16;    // per-layer cap
  double accum_upper_bound = 1024;  // cap on carried * scale
  bool power_of_two = true;         // 2^floor(log2(scale))
};

class AdaptiveLossScaling {
 public:
  explicit AdaptiveLossScaling(const AdaptiveLossScalingConfig& config = {});

  // get_loss_scale_by_approx_range:
  //   sigma = sqrt((g.std^2 + g.mean^2) * (W.std^2 + W.mean^2))   (product's RMS)
  //   if sigma == 0: return 1
  //   s = max(u_min / (sqrt(2) * erfinv(underflow_fraction) * sigma), 1)
  //   o_max = max |{g.max W.max, g.min W.min, g.max W.min, g.min W.max}|
  //   return min(s, (u_max / fan_in) / o_max)
  double unbound_scale(const AdaptiveLayerInput& in) const;

  // get_loss_scale: unbound_scale, then (use_bound)
  //   s = min(accum_upper_bound / carried, s); s = min(scale_upper_bound, s)
  // then (power_of_two) s = 2^floor(log2 s).
  // The result may be below 1 when overflow is the binding constraint.
  double layer_scale(const AdaptiveLayerInput& in, double carried) const;

  // AdaLossChainer.rescaling, for gradients that meet: `scales` are the scales
  // the branch gradients carry, `max_abs` their largest magnitudes. Returns
  // the largest carried scale t with max(max_abs) * t < u_max; if none, halves
  // min(scales) down to 1/8 looking for one; throws std::range_error if even
  // that overflows. Each branch is then multiplied by t / its scale.
  // (Upstream multiplies the already-scaled maxima by t again; reproduced.)
  double rescale_target(std::span<const double> scales, std::span<const double> max_abs) const;

  const AdaptiveLossScalingConfig& config() const { return config_; }

 private:
  AdaptiveLossScalingConfig config_;
  double underflow_z_;  // erfinv(underflow_fraction) * sqrt(2)
};

}  // namespace rpsim::sim
