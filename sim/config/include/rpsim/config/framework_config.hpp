// Recipes as users already wrote them for their framework, translated into an
// rpsim training config with the same meaning:
//  - a DeepSpeed config file (fp16/bf16 blocks, gradient_clipping, optimizer,
//    train_batch_size, gradient_accumulation_steps); fields that do not apply
//    to a simulator are listed as ignored, unknown fields are an error. rpsim
//    keys DeepSpeed has no name for (steps, epochs, model, data, seed, ...)
//    may stand beside them: the file stays a DeepSpeed file;
//  - Keras mixed-precision policy names (mixed_float16, mixed_bfloat16,
//    float32) as "policy";
//  - PyTorch GradScaler(...) keyword arguments as "grad_scaler";
//  - Transformer Engine DelayedScaling recipe fields as "fp8_recipe".
// Each vocabulary is a table of fields (framework_config.cpp,
// framework_names.cpp); the same tables give the hints that name a key in
// the other vocabulary.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rpsim::sim::config {

class KeyReport;

struct Translation {
  nlohmann::json config;             // an rpsim training config (parse_config's input)
  std::string kind = "rpsim";        // the vocabulary read: "rpsim" or "deepspeed"
  std::vector<std::string> ignored;  // fields read but meaningless in a simulator (with why)
  std::vector<std::string> notes;    // what each framework field became ("fp16.enabled -> policy fp16-amp")
};

// A DeepSpeed config has at least one key only DeepSpeed has (train_batch_size,
// fp16, bf16, zero_optimization, ...); rpsim keys beside them do not change that.
bool looks_like_deepspeed(const nlohmann::json& j);

// Translates `j`, written in `vocabulary` ("deepspeed" or "rpsim"), into
// rpsim's. Unknown keys and conflicts go to `report`, all of them; a bad
// value throws ConfigError naming the key as the file wrote it.
Translation translate_framework_config(const nlohmann::json& j, const std::string& vocabulary,
                                       KeyReport& report);

// The translations inside rpsim's own vocabulary (Keras policy names,
// grad_scaler, fp8_recipe), applied to `t.config` (framework_names.cpp).
void translate_framework_names(Translation& t, KeyReport& report);
// The framework keys rpsim's vocabulary accepts beside its own.
const std::vector<std::string>& framework_extension_keys();

// A framework field a simulator has no use for at its neutral value (the one
// at which it changes nothing in one process); another value would change the
// arithmetic, so it is refused by name rather than ignored (an ignored
// amsgrad=true, or TE's override_linear_precision, is another run, silently).
struct UnsimulatedField {
  const char* name;
  std::optional<bool> neutral;  // none: meaningless at every value
  const char* why;              // why another value is refused
};
// Each field of `fields` that object `block` holds: listed in `t.ignored` as
// PATH.NAME, or ConfigError naming it when it is not its neutral value. A
// field given as an object counts by its "enabled" (DeepSpeed's "amp": {...}).
void ignore_unsimulated(const nlohmann::json& block, const std::string& path,
                        std::span<const UnsimulatedField> fields, Translation& t);

// For a key the config's `vocabulary` does not have but the other one does:
// "...; this config (DeepSpeed) calls it train_batch_size". Empty otherwise.
std::string vocabulary_hint(const std::string& path, const std::string& vocabulary);

}  // namespace rpsim::sim::config
