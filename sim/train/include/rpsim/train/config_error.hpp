// Errors in a training configuration. The message starts with the key path
// ("optimizer.lr: expected a number, got \"x\""); the loader prefixes the
// file. Unknown keys are checked apart (the config layer, sim/config), all at
// once. Here, not in the config layer, because the simulator's own tables
// (ops, models, policies, DeepSpeed schedules) check their arguments with it.
#pragma once

#include <cmath>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rpsim::sim::train {

class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The names of `known` a plausible typo away from `name` (edit distance with
// transpositions, case ignored, or one containing the other), nearest first,
// at most `count`.
std::vector<std::string> nearest_names(std::string_view name, const std::vector<std::string>& known,
                                       std::size_t count = 3);

// " (did you mean a or b?)", or "" when nothing is near.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& known);

namespace config_json {

inline std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

[[noreturn]] inline void fail(const std::string& path, const std::string& message) {
  throw ConfigError(path + ": " + message);
}

inline std::string describe(const nlohmann::json& j) {
  // replace: a message must never throw on a string that is not UTF-8.
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

inline void expect_object(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) fail(path, "expected an object, got " + describe(j));
}

// Every key of `j` must be in `allowed` (a layer's arguments in the op
// table); names every key that is not, at once, with the known ones.
inline void check_keys(const nlohmann::json& j, const std::set<std::string>& allowed,
                       const std::string& path) {
  expect_object(j, path);
  std::string unknown;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!allowed.count(it.key())) unknown += (unknown.empty() ? "" : ", ") + join(path, it.key());
  if (unknown.empty()) return;
  std::string known;
  for (const auto& k : allowed) known += (known.empty() ? "" : ", ") + k;
  fail(unknown, "unknown key (known: " + known + ")");
}

inline double number(const nlohmann::json& j, const std::string& path) {
  if (!j.is_number()) fail(path, "expected a number, got " + describe(j));
  return j.get<double>();
}

// 2.0 is an integer, 2.5 is not; neither is 1e41 (no long long holds it,
// and casting it would be undefined: the fuzzer found that).
inline bool is_integer(const nlohmann::json& j) {
  if (j.is_number_unsigned()) return j.get<unsigned long long>() <= 9223372036854775807ULL;
  if (j.is_number_integer()) return true;
  if (!j.is_number_float()) return false;
  const double x = j.get<double>();
  return x >= -9223372036854775808.0 && x < 9223372036854775808.0 && x == std::trunc(x);
}

inline long long integer(const nlohmann::json& j, const std::string& path) {
  if (!is_integer(j)) fail(path, "expected an integer, got " + describe(j));
  return j.is_number_integer() ? j.get<long long>() : (long long)j.get<double>();
}

inline bool boolean(const nlohmann::json& j, const std::string& path) {
  if (!j.is_boolean()) fail(path, "expected true or false, got " + describe(j));
  return j.get<bool>();
}

inline std::string string(const nlohmann::json& j, const std::string& path) {
  if (!j.is_string()) fail(path, "expected a string, got " + describe(j));
  return j.get<std::string>();
}

}  // namespace config_json
}  // namespace rpsim::sim::train
