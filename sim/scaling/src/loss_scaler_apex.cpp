// NVIDIA Apex amp: apex/amp/scaler.py LossScaler.update_scale (dynamic
// loss_scale="dynamic", the default of opt levels O1/O2).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "loss_scaler_policies.hpp"

namespace rpsim::sim::detail {

namespace {

class ApexAmpLossScaler final : public LossScaler {
 public:
  explicit ApexAmpLossScaler(const ScalerConfig& c)
      : loss_scale_(*c.init_scale),
        min_loss_scale_(c.min_scale),
        max_loss_scale_(*c.max_scale),
        scale_seq_len_(*c.growth_interval) {}

  std::string_view policy() const override { return "apex"; }
  double scale() const override { return loss_scale_; }  // a Python float: binary64

  //   if has_overflow and dynamic:
  //     should_skip = True
  //     if min_loss_scale: loss_scale = max(min_loss_scale, loss_scale / 2.)
  //     else:              loss_scale = loss_scale / 2.
  //     unskipped = 0
  //   else:
  //     should_skip = False; unskipped += 1
  //   if unskipped == scale_seq_len and dynamic:
  //     loss_scale = min(max_loss_scale, loss_scale * 2.); unskipped = 0
  // The factor is the literal 2. (the scale_factor argument of __init__ is
  // never read), and the growth test sits outside the else branch, which is
  // harmless because an overflow has just zeroed _unskipped.
  bool update(bool has_overflow) override {
    bool should_skip;
    if (has_overflow) {
      should_skip = true;
      if (min_loss_scale_)
        loss_scale_ = std::max(*min_loss_scale_, loss_scale_ / 2.0);
      else
        loss_scale_ = loss_scale_ / 2.0;
      unskipped_ = 0;
    } else {
      should_skip = false;
      unskipped_ += 1;
    }
    if (unskipped_ == scale_seq_len_) {
      loss_scale_ = std::min(max_loss_scale_, loss_scale_ * 2.0);
      unskipped_ = 0;
    }
    return should_skip;
  }

  std::string state() const override {
    return fmt::format("loss_scale={} unskipped={}", loss_scale_, unskipped_);
  }
  std::unique_ptr<LossScaler> clone() const override { return std::make_unique<ApexAmpLossScaler>(*this); }

 private:
  double loss_scale_;
  std::optional<double> min_loss_scale_;  // None by default: no floor
  double max_loss_scale_;
  std::int64_t scale_seq_len_;
  std::int64_t unskipped_ = 0;
};

}  // namespace

std::unique_ptr<LossScaler> make_apex_scaler(const ScalerConfig& c) {
  return std::make_unique<ApexAmpLossScaler>(c);
}

}  // namespace rpsim::sim::detail
