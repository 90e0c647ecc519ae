// Internal: one constructor per framework, each in its own
// loss_scaler_<framework>.cpp. They take a config already resolved and
// validated by resolve_scaler_config (every field they use is set).
#pragma once

#include <memory>

#include "rpsim/scaling/loss_scaler.hpp"

namespace rpsim::sim::detail {

std::unique_ptr<LossScaler> make_no_scaling();
std::unique_ptr<LossScaler> make_static_scaler(const ScalerConfig& resolved);
std::unique_ptr<LossScaler> make_pytorch_scaler(const ScalerConfig& resolved);
std::unique_ptr<LossScaler> make_deepspeed_scaler(const ScalerConfig& resolved);
std::unique_ptr<LossScaler> make_megatron_scaler(const ScalerConfig& resolved);
std::unique_ptr<LossScaler> make_apex_scaler(const ScalerConfig& resolved);
std::unique_ptr<LossScaler> make_keras_scaler(const ScalerConfig& resolved);
std::unique_ptr<LossScaler> make_tf2_scaler(const ScalerConfig& resolved);
std::unique_ptr<LossScaler> make_adaptive_scaler(const ScalerConfig& resolved);

// Scales kept in a float32 tensor/variable upstream (PyTorch, Megatron,
// Keras, TF) are rounded to binary32 on every assignment, as there.
inline double to_binary32(double x) {
  return static_cast<double>(static_cast<float>(x));
}

}  // namespace rpsim::sim::detail
