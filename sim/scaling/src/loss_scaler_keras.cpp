// Keras loss scaling: Keras 3 LossScaleOptimizer and tf.keras (TF 2.x)
// LossScaleOptimizer's _DynamicLossScaleState. Both keep the scale in a
// float32 variable.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "loss_scaler_policies.hpp"

namespace rpsim::sim::detail {

namespace {

// Keras 3: keras/src/optimizers/loss_scale_optimizer.py,
// LossScaleOptimizer._stateful_handle_finite_grads / _handle_non_finite_grads:
//   finite:     if step_counter == dynamic_growth_steps - 1:
//                   step_counter = 0; dynamic_scale = dynamic_scale * 2.0
//               else: step_counter += 1
//               (and the inner optimizer applies the unscaled gradients)
//   non-finite: step_counter = 0; dynamic_scale = dynamic_scale / 2.0 (step skipped)
// No floor, no ceiling and no finiteness check: a float32 scale doubled past
// 2^127 becomes inf and stays inf (inf / 2 = inf).
class KerasLossScaleOptimizer final : public LossScaler {
 public:
  explicit KerasLossScaleOptimizer(const ScalerConfig& c)
      : dynamic_scale_(static_cast<float>(*c.init_scale)), dynamic_growth_steps_(*c.growth_interval) {}

  std::string_view policy() const override { return "keras"; }
  double scale() const override { return dynamic_scale_; }

  bool update(bool found_nonfinite) override {
    if (found_nonfinite) {
      step_counter_ = 0;
      dynamic_scale_ = dynamic_scale_ / 2.0f;
      return true;
    }
    if (step_counter_ == dynamic_growth_steps_ - 1) {
      step_counter_ = 0;
      dynamic_scale_ = dynamic_scale_ * 2.0f;
    } else {
      step_counter_ += 1;
    }
    return false;
  }

  std::string state() const override {
    return fmt::format("dynamic_scale={} step_counter={}", static_cast<double>(dynamic_scale_),
                       step_counter_);
  }
  std::unique_ptr<LossScaler> clone() const override {
    return std::make_unique<KerasLossScaleOptimizer>(*this);
  }

 private:
  float dynamic_scale_;
  std::int64_t dynamic_growth_steps_;
  std::int64_t step_counter_ = 0;
};

// tf.keras 2: tensorflow/python/keras/mixed_precision/loss_scale_optimizer.py
// _DynamicLossScaleState.update (same logic as the older
// tf.train.experimental.DynamicLossScale):
//   finite:     if counter + 1 >= growth_steps:
//                   _assign_if_finite(scale, scale * multiplier); counter = 0
//               else: counter += 1
//   non-finite: counter = 0; scale = maximum(scale / multiplier, 1)
// So the scale never drops below 1 and never grows to inf (the growth is
// dropped, the counter still reset).
class Tf2DynamicLossScale final : public LossScaler {
 public:
  explicit Tf2DynamicLossScale(const ScalerConfig& c)
      : current_loss_scale_(static_cast<float>(*c.init_scale)),
        multiplier_(static_cast<float>(*c.growth_factor)),
        growth_steps_(*c.growth_interval) {}

  std::string_view policy() const override { return "tf2"; }
  double scale() const override { return current_loss_scale_; }

  bool update(bool found_nonfinite) override {
    if (found_nonfinite) {
      counter_ = 0;
      current_loss_scale_ = std::max(current_loss_scale_ / multiplier_, 1.0f);
      return true;
    }
    if (counter_ + 1 >= growth_steps_) {
      const float new_loss_scale = current_loss_scale_ * multiplier_;
      if (std::isfinite(new_loss_scale)) current_loss_scale_ = new_loss_scale;
      counter_ = 0;
    } else {
      counter_ += 1;
    }
    return false;
  }

  std::string state() const override {
    return fmt::format("current_loss_scale={} counter={}", static_cast<double>(current_loss_scale_),
                       counter_);
  }
  std::unique_ptr<LossScaler> clone() const override { return std::make_unique<Tf2DynamicLossScale>(*this); }

 private:
  float current_loss_scale_;
  float multiplier_;  // Python float upstream, cast to the variable's float32 in the product
  std::int64_t growth_steps_;
  std::int64_t counter_ = 0;  // int64 variable 'good_steps'
};

}  // namespace

std::unique_ptr<LossScaler> make_keras_scaler(const ScalerConfig& c) {
  return std::make_unique<KerasLossScaleOptimizer>(c);
}
std::unique_ptr<LossScaler> make_tf2_scaler(const ScalerConfig& c) {
  return std::make_unique<Tf2DynamicLossScale>(c);
}

}  // namespace rpsim::sim::detail
