// DeepSpeed: deepspeed/runtime/fp16/loss_scaler.py DynamicLossScaler.update_scale
// (the scaler of the ZeRO optimizers, built by CreateLossScaler from the "fp16"
// config section: initial_scale_power, loss_scale_window, hysteresis,
// consecutive_hysteresis, min_loss_scale).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "loss_scaler_policies.hpp"

namespace rpsim::sim::detail {

namespace {

class DeepSpeedDynamicLossScaler final : public LossScaler {
 public:
  explicit DeepSpeedDynamicLossScaler(const ScalerConfig& c)
      : cur_scale_(*c.init_scale),
        scale_window_(*c.growth_interval),
        min_scale_(*c.min_scale),
        delayed_shift_(*c.hysteresis),
        cur_hysteresis_(*c.hysteresis),
        consecutive_hysteresis_(c.consecutive_hysteresis),
        raise_error_at_min_scale_(c.raise_at_min_scale) {}

  std::string_view policy() const override { return "deepspeed"; }
  double scale() const override { return cur_scale_; }  // a Python float: binary64

  // update_scale(overflow), line for line:
  //   if overflow:
  //     if delayed_shift == 1 or cur_hysteresis == 1:
  //       if cur_scale == min_scale and raise_error_at_min_scale: raise
  //       else: cur_scale = max(cur_scale / scale_factor, min_scale)
  //     else: cur_hysteresis -= 1
  //     last_overflow_iter = cur_iter
  //   else:
  //     if consecutive_hysteresis: cur_hysteresis = delayed_shift
  //     stable_interval = (cur_iter - last_overflow_iter) - 1
  //     if stable_interval > 0 and stable_interval % scale_window == 0:
  //       if not consecutive_hysteresis: cur_hysteresis = delayed_shift
  //       cur_scale *= scale_factor
  //   cur_iter += 1
  // With cur_iter starting at 0 and last_overflow_iter at -1, stable_interval
  // at the n-th clean step since an overflow (or the start) is n - 1, so the
  // first growth comes on the (scale_window + 1)-th clean step and later ones
  // every scale_window steps. The hysteresis budget is refilled only on growth
  // (or on every clean step with consecutive_hysteresis), so once spent, every
  // further overflow halves the scale.
  // The ZeRO optimizers skip the step on every overflow, hysteresis or not.
  bool update(bool overflow) override {
    if (overflow) {
      if (delayed_shift_ == 1 || cur_hysteresis_ == 1) {
        if (cur_scale_ == min_scale_ && raise_error_at_min_scale_)
          throw LossScaleAtMinimum(fmt::format(
              "deepspeed: overflow at iteration {} with the loss scale already at min_loss_scale {} "
              "(raise_error_at_min_scale); upstream raises \"Current loss scale already at minimum - "
              "cannot decrease scale anymore. Exiting run.\"",
              cur_iter_, min_scale_));
        cur_scale_ = std::max(cur_scale_ / kScaleFactor, min_scale_);
      } else {
        cur_hysteresis_ -= 1;
      }
      last_overflow_iter_ = cur_iter_;
    } else {
      if (consecutive_hysteresis_) cur_hysteresis_ = delayed_shift_;
      const std::int64_t stable_interval = (cur_iter_ - last_overflow_iter_) - 1;
      if (stable_interval > 0 && stable_interval % scale_window_ == 0) {
        if (!consecutive_hysteresis_) cur_hysteresis_ = delayed_shift_;
        cur_scale_ *= kScaleFactor;
      }
    }
    cur_iter_ += 1;
    return overflow;
  }

  std::string state() const override {
    return fmt::format("cur_scale={} cur_iter={} last_overflow_iter={} cur_hysteresis={}", cur_scale_,
                       cur_iter_, last_overflow_iter_, cur_hysteresis_);
  }
  std::unique_ptr<LossScaler> clone() const override {
    return std::make_unique<DeepSpeedDynamicLossScaler>(*this);
  }

 private:
  static constexpr double kScaleFactor = 2.0;  // self.scale_factor = 2.0, not configurable
  double cur_scale_;
  std::int64_t scale_window_;
  double min_scale_;
  std::int64_t delayed_shift_;
  std::int64_t cur_hysteresis_;
  bool consecutive_hysteresis_;
  bool raise_error_at_min_scale_;
  std::int64_t cur_iter_ = 0;
  std::int64_t last_overflow_iter_ = -1;
};

}  // namespace

std::unique_ptr<LossScaler> make_deepspeed_scaler(const ScalerConfig& c) {
  return std::make_unique<DeepSpeedDynamicLossScaler>(c);
}

}  // namespace rpsim::sim::detail
