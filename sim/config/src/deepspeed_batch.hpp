// Internal to the DeepSpeed row (deepspeed_config.cpp): DeepSpeed's three batch fields and
// data_types.grad_accum_dtype, checked and translated into batch_size,
// gradient_accumulation_steps and grad_accum_format.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "rpsim/config/framework_config.hpp"

namespace rpsim::sim::config {

class KeyReport;

struct DeepSpeedBatch {
  std::int64_t global = 0, micro = 0, accumulation = 0;  // 0: not given
  std::string grad_accum_dtype;                          // "" if not given
};

// A batch field: an integer >= 1, as DeepSpeed asserts (runtime/config.py, _batch_assertion).
std::int64_t batch_field(const nlohmann::json& v, const std::string& path);
// The data_types block: its grad_accum_dtype, one of DeepSpeed's spellings.
void read_data_types(const nlohmann::json& v, const std::string& path, KeyReport& report, DeepSpeedBatch& d);
// batch_size, gradient_accumulation_steps and grad_accum_format into
// t.config, with a note for each; `ds` is the whole DeepSpeed file (its
// zero_optimization decides the default accumulation type).
void translate_batch(DeepSpeedBatch& d, const nlohmann::json& ds, Translation& t);

}  // namespace rpsim::sim::config
