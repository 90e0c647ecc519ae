// Recipes as users already wrote them for their framework, translated into an
// rpsim training config with the same meaning:
//  - a DeepSpeed config file (fp16/bf16 blocks, gradient_clipping, optimizer,
//    train_batch_size, gradient_accumulation_steps); fields that do not apply
//    to a simulator are listed as ignored, unknown fields are an error;
//  - Keras mixed-precision policy names (mixed_float16, mixed_bfloat16,
//    float32) as "policy";
//  - PyTorch GradScaler(...) keyword arguments as "grad_scaler";
//  - Transformer Engine DelayedScaling recipe fields as "fp8_recipe".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rpsim::sim::train {

struct Translation {
  nlohmann::json config;             // an rpsim training config (parse_config's input)
  std::string kind = "rpsim";        // "rpsim" or "deepspeed"
  std::vector<std::string> ignored;  // fields read but meaningless in a simulator
  std::vector<std::string> notes;    // how a field was mapped where it is not one to one
};

// A DeepSpeed config has none of rpsim's own top-level keys and at least one
// of DeepSpeed's (train_batch_size, fp16, bf16, zero_optimization, ...).
bool looks_like_deepspeed(const nlohmann::json& j);

// Throws ConfigError naming `where` and the key path.
Translation translate_framework_config(const nlohmann::json& j, const std::string& where);

}  // namespace rpsim::sim::train
