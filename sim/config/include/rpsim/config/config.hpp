// A training config in rpsim's own vocabulary, read into the simulator's
// typed run description (rpsim/train/run_config.hpp). Files in any
// vocabulary, with overrides: config_loader.hpp.
//
//   train::Config c = config::parse_config(json);   // throws ConfigError naming the key
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rpsim/train/config_error.hpp"
#include "rpsim/train/run_config.hpp"

namespace rpsim::sim::config {

using train::Config;
using train::ConfigError;

// Every key checked (unknown key, wrong type, unknown policy/format, lr < 0,
// batch_size 0, ...) before any work; ConfigError names the key path, and
// lists every unknown key and wrong type at once (check_config_keys) with
// the nearest known names. `j` is in rpsim's own vocabulary:
// config_loader.hpp reads files in any vocabulary.
Config parse_config(const nlohmann::json& j);
// The top-level keys of rpsim's vocabulary, in reading order.
std::vector<std::string> config_keys();
// One row of the key tables, as help shows it: "optimizer.lr", "a number", "learning rate".
struct KeyHelp {
  std::string path;
  std::string type;
  std::string help;
};
// Every key of rpsim's vocabulary outside the policy (policy_key_help), depth first.
std::vector<KeyHelp> config_key_help();
// Every unknown key and every value of the wrong type in `j`, at any depth,
// into `report` (the key tables' one check); `also_known` adds names that
// count as known at the top (suggestions only).
class KeyReport;
void check_config_keys(const nlohmann::json& j, KeyReport& report,
                       const std::vector<std::string>& also_known = {});
// `--set a.b=value` (config_loader.cpp): value parsed as JSON when it is
// JSON, else taken as a string; set through set_config_path.
void apply_override(nlohmann::json& j, const std::string& assignment);

}  // namespace rpsim::sim::config
