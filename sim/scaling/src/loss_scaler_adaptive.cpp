// Per-layer adaptive loss scaling (Zhao et al.); see adaptive_loss_scaling.hpp.
// Statistics and bounds are computed in binary64; upstream mixes numpy
// float32 scalars, which can differ only where a bound lands within float32
// rounding of a power of two (the result is floored to one).
#include "loss_scaler_policies.hpp"
#include "rpsim/scaling/adaptive_loss_scaling.hpp"

#include <fmt/format.h>
#include <boost/math/special_functions/erf.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace rpsim::sim {

TensorMoments moments_of(std::span<const float> values) {
  if (values.empty()) throw std::invalid_argument("moments_of: empty tensor");
  TensorMoments m;
  double sum = 0;
  m.min = m.max = values[0];
  for (const float v : values) {
    sum += v;
    m.min = std::min<double>(m.min, v);
    m.max = std::max<double>(m.max, v);
  }
  m.mean = sum / static_cast<double>(values.size());
  double sq = 0;
  for (const float v : values) sq += (v - m.mean) * (v - m.mean);
  m.std = std::sqrt(sq / static_cast<double>(values.size()));
  return m;
}

AdaptiveLossScaling::AdaptiveLossScaling(const AdaptiveLossScalingConfig& c) : config_(c) {
  auto positive = [](double v, const char* field) {
    if (!(std::isfinite(v) && v > 0))
      throw std::invalid_argument(
          fmt::format("adaptive loss scaling: {} must be positive and finite, got {}", field, v));
  };
  positive(c.u_min, "u_min");
  positive(c.u_max, "u_max");
  positive(c.scale_upper_bound, "scale_upper_bound");
  positive(c.accum_upper_bound, "accum_upper_bound");
  if (!(c.underflow_fraction > 0 && c.underflow_fraction < 1))
    throw std::invalid_argument(fmt::format(
        "adaptive loss scaling: underflow_fraction must lie in (0, 1), got {}", c.underflow_fraction));
  // self.n_uf_threshold = erfinv(n_uf_threshold) * np.sqrt(2)
  underflow_z_ = boost::math::erf_inv(c.underflow_fraction) * std::sqrt(2.0);
}

double AdaptiveLossScaling::unbound_scale(const AdaptiveLayerInput& in) const {
  if (in.fan_in < 1)
    throw std::invalid_argument(
        fmt::format("adaptive loss scaling: fan_in must be at least 1, got {}", in.fan_in));
  const auto& g = in.grad;
  const auto& w = in.weight;
  // get_mean_and_std_of_product: O_var = (X_sigma^2 + X_mu^2) * (Y_sigma^2 + Y_mu^2); mean taken as 0.
  const double o_sigma = std::sqrt((g.std * g.std + g.mean * g.mean) * (w.std * w.std + w.mean * w.mean));
  if (o_sigma == 0) return 1.0;  // e.g. an all-zero gradient
  double u_max = config_.u_max;
  if (config_.bound_by_fan_in) u_max /= static_cast<double>(in.fan_in);
  double scale = config_.u_min / (underflow_z_ * o_sigma);
  scale = std::max(scale, 1.0);
  const double o_max = std::max({std::fabs(g.max * w.max), std::fabs(g.min * w.min), std::fabs(g.max * w.min),
                                 std::fabs(g.min * w.max)});
  return std::min(scale, u_max / o_max);
}

double AdaptiveLossScaling::layer_scale(const AdaptiveLayerInput& in, double carried) const {
  if (!(std::isfinite(carried) && carried > 0))
    throw std::invalid_argument(
        fmt::format("adaptive loss scaling: carried scale must be positive and finite, got {}", carried));
  double scale = unbound_scale(in);
  if (config_.use_bound) {
    scale = std::min(config_.accum_upper_bound / carried, scale);  // bound by accumulated loss scale
    scale = std::min(config_.scale_upper_bound, scale);            // hard upper bound
  }
  if (config_.power_of_two) scale = std::exp2(std::floor(std::log2(scale)));
  return scale;
}

double AdaptiveLossScaling::rescale_target(std::span<const double> scales,
                                           std::span<const double> max_abs) const {
  if (scales.size() < 2 || scales.size() != max_abs.size())
    throw std::invalid_argument(fmt::format(
        "adaptive loss scaling: rescaling needs >= 2 branches with one max each, got {} scales and {} maxima",
        scales.size(), max_abs.size()));
  std::vector<double> sorted(scales.begin(), scales.end());
  std::sort(sorted.begin(), sorted.end());
  const double max_g = *std::max_element(max_abs.begin(), max_abs.end());
  for (auto it = sorted.rbegin(); it != sorted.rend(); ++it)
    if (max_g * *it < config_.u_max) return *it;
  double target = sorted.front();
  while (target >= 1.0 / 8) {
    if (max_g * target < config_.u_max) break;
    target /= 2;
  }
  if (max_g * target >= config_.u_max)
    throw std::range_error(
        fmt::format("adaptive loss scaling: no rescaling target for max gradient {}", max_g));
  return target;
}

// policy "adaptive": the scaler-table row. The global scale stays at
// init_scale; what adapts is each layer's factor, which the trainer takes from
// per_layer() during backward. A step with an inf/NaN gradient is skipped and
// nothing else changes (AdaLoss has no global back-off).
namespace {
class AdaptiveScaler final : public LossScaler {
 public:
  explicit AdaptiveScaler(double scale) : scale_(scale) {}
  std::string_view policy() const override { return "adaptive"; }
  double scale() const override { return scale_; }
  bool update(bool found_nonfinite) override {
    skipped_ += found_nonfinite;
    return found_nonfinite;
  }
  std::string state() const override { return fmt::format("skipped={}", skipped_); }
  std::unique_ptr<LossScaler> clone() const override { return std::make_unique<AdaptiveScaler>(*this); }
  const AdaptiveLossScaling* per_layer() const override { return &layers_; }

 private:
  double scale_;
  std::int64_t skipped_ = 0;
  AdaptiveLossScaling layers_;
};
}  // namespace

std::unique_ptr<LossScaler> detail::make_adaptive_scaler(const ScalerConfig& resolved) {
  return std::make_unique<AdaptiveScaler>(*resolved.init_scale);
}

}  // namespace rpsim::sim
