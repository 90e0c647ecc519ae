// Internal to the config layer: a config or a policy whose keys (names and
// types) have already been checked, with every other key of the config, at
// once (check_config_keys: the loader, or parse_config), read without
// checking them a second time.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "rpsim/train/policy.hpp"
#include "rpsim/train/run_config.hpp"

namespace rpsim::sim::config {

train::Config read_checked_config(const nlohmann::json& j);
train::PrecisionPolicy read_checked_policy(const nlohmann::json& j, const std::string& path);

}  // namespace rpsim::sim::config
