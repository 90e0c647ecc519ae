// Megatron-LM: megatron/core/optimizer/grad_scaler.py DynamicGradScaler.update.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "loss_scaler_policies.hpp"

namespace rpsim::sim::detail {

namespace {

class MegatronDynamicGradScaler final : public LossScaler {
 public:
  // _scale, min_scale, growth_factor and backoff_factor are all float32 CUDA
  // tensors (torch.tensor([...], dtype=torch.float)), so every product is a
  // binary32 product.
  explicit MegatronDynamicGradScaler(const ScalerConfig& c)
      : scale_(static_cast<float>(*c.init_scale)),
        min_scale_(static_cast<float>(*c.min_scale)),
        growth_factor_(static_cast<float>(*c.growth_factor)),
        backoff_factor_(static_cast<float>(*c.backoff_factor)),
        growth_interval_(*c.growth_interval),
        hysteresis_(*c.hysteresis),
        hysteresis_tracker_(*c.hysteresis) {}

  std::string_view policy() const override { return "megatron"; }
  double scale() const override { return scale_; }

  //   if found_inf:
  //     growth_tracker = 0
  //     hysteresis_tracker -= 1
  //     if hysteresis_tracker <= 0: scale = max(scale * backoff_factor, min_scale)
  //   else:
  //     growth_tracker += 1
  //     if growth_tracker == growth_interval:
  //       growth_tracker = 0; hysteresis_tracker = hysteresis
  //       scale = scale * growth_factor          (no upper bound: may reach inf)
  // The hysteresis tracker keeps falling below zero, so after the first
  // back-off every overflow backs off again until a growth refills it; a clean
  // step alone does not. MixedPrecisionOptimizer.step skips every step with
  // found_inf, whether or not the scale moved.
  bool update(bool found_inf) override {
    if (found_inf) {
      growth_tracker_ = 0;
      hysteresis_tracker_ -= 1;
      if (hysteresis_tracker_ <= 0) scale_ = std::max(scale_ * backoff_factor_, min_scale_);
      return true;
    }
    growth_tracker_ += 1;
    if (growth_tracker_ == growth_interval_) {
      growth_tracker_ = 0;
      hysteresis_tracker_ = hysteresis_;
      scale_ = scale_ * growth_factor_;
    }
    return false;
  }

  std::string state() const override {
    return fmt::format("scale={} growth_tracker={} hysteresis_tracker={}", static_cast<double>(scale_),
                       growth_tracker_, hysteresis_tracker_);
  }
  std::unique_ptr<LossScaler> clone() const override {
    return std::make_unique<MegatronDynamicGradScaler>(*this);
  }

 private:
  float scale_, min_scale_, growth_factor_, backoff_factor_;
  std::int64_t growth_interval_, hysteresis_;
  std::int64_t growth_tracker_ = 0;
  std::int64_t hysteresis_tracker_;
};

}  // namespace

std::unique_ptr<LossScaler> make_megatron_scaler(const ScalerConfig& c) {
  return std::make_unique<MegatronDynamicGradScaler>(c);
}

}  // namespace rpsim::sim::detail
