// A precision policy read from a config: a named policy (sim/train
// policy.hpp's table), or a named policy with overrides.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rpsim/config/config.hpp"

#include "rpsim/train/policy.hpp"

namespace rpsim::sim::config {

class KeyReport;

// A policy from config: a name, or an object {"name": ..., overrides}. Keys:
// weights, master_weights, gradients, optimizer_state, optimizer_compute,
// rounding, update_rounding, kahan, autocast {format, allow, deny}, accumulation,
// ops {op: {compute, output, backward_compute, accumulation} | "follow"},
// fp8 {scaling, amax_history_len, amax_compute_algo, margin, block_size,
// weight_2d, hadamard, gradient_sr, high_precision_last}.
// An accumulation is a sim spec string ("tc:h100:fp16:fp32", "blocked:32:fp16",
// "sequential:bf16:sr") or a JSON object (sim::AccumulationModel::from_json).
// The named policies accumulate in sequential:binary32:rne, except fp64 (the
// FP64 shadow) in sequential:binary64:rne.
// Errors name `path` and the key.
train::PrecisionPolicy policy_from_json(const nlohmann::json& j, const std::string& path);
// Every unknown key and wrong type of policy object `j` (at `path`), at any
// depth, into `report`.
void check_policy_keys(const nlohmann::json& j, const std::string& path, KeyReport& report);
// The policy's key tables as help shows them ("policy.fp8.margin", ...).
std::vector<KeyHelp> policy_key_help();

}  // namespace rpsim::sim::config
