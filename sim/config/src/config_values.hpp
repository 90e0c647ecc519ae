// Internal to the config layer: the readers of values whose type the key
// tables (config_keys.hpp) have already checked. What they check is the
// value itself: a range, a known name.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rpsim::sim::config {

std::vector<int> positive_ints(const nlohmann::json& j, const std::string& path);
std::vector<std::int64_t> step_list(const nlohmann::json& j, const std::string& path);
double non_negative(const nlohmann::json& j, const std::string& path);
long long at_least(const nlohmann::json& j, const std::string& path, long long low);
std::string one_of(const nlohmann::json& j, const std::string& path, const std::vector<std::string>& allowed);
// A step number (>= 0).
std::int64_t steps_at(const nlohmann::json& j, const std::string& path);
// A width or count of the gpt model: a positive integer up to 2^20.
int size_at(const nlohmann::json& j, const std::string& path);
// An integer in [low, high] for an int field: a cast of a larger one wrapped
// silently (epochs 2^32 + 1 trained 1 epoch, 10^12 a negative count).
int int_in(const nlohmann::json& j, const std::string& path, int low, int high);

// The names of the simulator's tables a config may use.
std::vector<std::string> model_names();
std::vector<std::string> data_names();
std::vector<std::string> loss_names();  // the losses of the op table

}  // namespace rpsim::sim::config
