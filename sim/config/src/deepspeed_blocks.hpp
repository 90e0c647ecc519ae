// Internal to the DeepSpeed row (deepspeed_config.cpp): the readers of
// DeepSpeed's fp16, bf16, optimizer and scheduler blocks (deepspeed_blocks.cpp)
// and the field tables the row's hints and refusals are made from.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "deepspeed_batch.hpp"
#include "rpsim/config/framework_config.hpp"

namespace rpsim::sim::config {

class KeyReport;

// One DeepSpeed file being translated.
struct DeepSpeed {
  Translation& t;
  KeyReport& report;
  DeepSpeedBatch batch;
};

void read_fp16(const nlohmann::json& v, const std::string& path, DeepSpeed& d);
void read_bf16(const nlohmann::json& v, const std::string& path, DeepSpeed& d);
void read_optimizer(const nlohmann::json& v, const std::string& path, DeepSpeed& d);
// Read after the optimizer, whose block it completes.
void read_scheduler(const nlohmann::json& s, DeepSpeed& d);

// fp16 fields of dynamic loss scaling (DeepSpeed's DynamicLossScaler) and
// the ScalerConfig field each sets; initial_scale_power is a log2.
struct Fp16Field {
  const char* deepspeed;
  const char* scaler;
};
std::span<const Fp16Field> fp16_scaler_fields();
// FusedAdam / torch.optim parameters that rpsim's optimizers take under the same names.
std::span<const char* const> optimizer_params();
// The blocks' unsimulated fields (fp16, bf16, optimizer.params, the top level).
std::span<const RefusedFields> deepspeed_refused();
// The top level's: blocks refused only when enabled (amp, torch_autocast).
std::span<const UnsimulatedField> deepspeed_enabled_refused();

}  // namespace rpsim::sim::config
