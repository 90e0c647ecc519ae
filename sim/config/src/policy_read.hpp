// Internal to the config layer: a policy whose keys parse_config has
// already checked (with every other key of the config, at once), read
// without checking them a second time.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "rpsim/train/policy.hpp"

namespace rpsim::sim::config {

train::PrecisionPolicy read_checked_policy(const nlohmann::json& j, const std::string& path);

}  // namespace rpsim::sim::config
