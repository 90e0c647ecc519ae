// The one way a training config is read, by `rpsim train`, sweeps and
// studies alike: a JSON file (or object) in rpsim's vocabulary or in a
// framework's (a DeepSpeed file; Keras policy names, GradScaler keywords and
// Transformer Engine's fp8_recipe inside rpsim's), then the overrides
// (--set, a sweep's grid, a study's train_set) in the vocabulary the file was
// written in, then the translation into rpsim's vocabulary and the check of
// every key: all unknown keys are reported at once, with the nearest names.
//
//   auto loaded = config::read_config_file("deepspeed-fp16.json", {"fp16.initial_scale_power=10"});
//   train::Config config = loaded.parse();   // ConfigError "deepspeed-fp16.json: key: why"
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "rpsim/config/config.hpp"

namespace rpsim::sim::config {

struct LoadedConfig {
  std::string where;                 // the file, or what the JSON is ("sweep base")
  std::string vocabulary = "rpsim";  // as the file was written: a file row of framework_vocabularies()
  nlohmann::json raw;                // as written, with the overrides applied
  nlohmann::json config;             // in rpsim's vocabulary: parse_config's input
  std::vector<std::string> ignored;  // framework fields without meaning here (with why)
  std::vector<std::string> notes;    // what each framework field became
  // parse_config(config); a ConfigError's message starts with `where`.
  Config parse() const;
};

// Throws ConfigError whose message starts with the file name: a folder, a
// file that cannot be read, not JSON, unknown keys, a bad override. The
// file's "extends" is resolved first (config_file.hpp). A config that does
// not give "name" itself takes the file's stem (not its base's name).
LoadedConfig read_config_file(const std::filesystem::path& file,
                              const std::vector<std::string>& overrides = {});
// The same for JSON already in memory (`where` names it in messages); its
// "extends" names a file relative to the working folder.
LoadedConfig read_config_json(const nlohmann::json& raw, const std::string& where,
                              const std::vector<std::string>& overrides = {});
// Overrides as (dotted key, JSON value) pairs: a sweep's grid point.
LoadedConfig read_config_json(const nlohmann::json& raw, const std::string& where,
                              const std::vector<std::pair<std::string, nlohmann::json>>& settings);

// The one dotted-path setter: sets `key` ("loss_scaler.init_scale") to
// `value`, creating objects on the way. A named policy given as a string
// ("policy": "fp32") is shorthand for {"name": "fp32"}, so policy.<key> sets
// a key inside it. Throws ConfigError for an empty component or a path
// through a value that is not an object.
void set_config_path(nlohmann::json& j, const std::string& key, const nlohmann::json& value);
// "key=value": the value as JSON when it is JSON, else as a string. Throws
// ConfigError for text that is not UTF-8 or has no key.
std::pair<std::string, nlohmann::json> parse_assignment(const std::string& assignment);

}  // namespace rpsim::sim::config
