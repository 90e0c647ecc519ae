// PyTorch GradScaler: torch/amp/grad_scaler.py (GradScaler.update calls
// torch._amp_update_scale_) and the kernel behind it,
// aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp _amp_update_scale_cpu_kernel
// (aten/src/ATen/native/cuda/AmpKernels.cu amp_update_scale_cuda_kernel is the
// same state machine).
#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "loss_scaler_policies.hpp"

namespace rpsim::sim::detail {

namespace {

class PyTorchGradScaler final : public LossScaler {
 public:
  explicit PyTorchGradScaler(const ScalerConfig& c)
      // _lazy_init_scale_growth_tracker: torch.full((), init_scale, dtype=torch.float32).
      : scale_(static_cast<float>(*c.init_scale)),
        growth_factor_(*c.growth_factor),
        backoff_factor_(*c.backoff_factor),
        growth_interval_(*c.growth_interval) {}

  std::string_view policy() const override { return "pytorch"; }
  double scale() const override { return scale_; }

  // GradScaler.step skips optimizer.step() when found_inf; update() then runs
  // the kernel:
  //   if found_inf: scale = scale * backoff_factor (float * double, stored
  //                 as float); growth_tracker = 0
  //   else: successful = growth_tracker + 1
  //         if successful == growth_interval:
  //             new_scale = float(scale * growth_factor)
  //             if isfinite(new_scale): scale = new_scale   (never grows to inf)
  //             growth_tracker = 0                          (reset even if blocked)
  //         else: growth_tracker = successful
  bool update(bool found_nonfinite) override {
    if (found_nonfinite) {
      scale_ = static_cast<float>(static_cast<double>(scale_) * backoff_factor_);
      growth_tracker_ = 0;
      return true;
    }
    const std::int64_t successful = growth_tracker_ + 1;
    if (successful == growth_interval_) {
      const auto new_scale = static_cast<float>(static_cast<double>(scale_) * growth_factor_);
      if (std::isfinite(new_scale)) scale_ = new_scale;
      growth_tracker_ = 0;
    } else {
      growth_tracker_ = successful;
    }
    return false;
  }

  std::string state() const override {
    return fmt::format("scale={} growth_tracker={}", static_cast<double>(scale_), growth_tracker_);
  }
  std::unique_ptr<LossScaler> clone() const override { return std::make_unique<PyTorchGradScaler>(*this); }

 private:
  float scale_;  // GradScaler._scale is a float32 tensor
  double growth_factor_, backoff_factor_;
  std::int64_t growth_interval_;
  std::int64_t growth_tracker_ = 0;  // int32 tensor upstream; a step count never reaches 2^31 here
};

}  // namespace

std::unique_ptr<LossScaler> make_pytorch_scaler(const ScalerConfig& c) {
  return std::make_unique<PyTorchGradScaler>(c);
}

}  // namespace rpsim::sim::detail
