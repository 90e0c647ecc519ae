// The value readers of the config's key tables (config_values.hpp).
#include "config_values.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "rpsim/train/config_error.hpp"
#include "rpsim/train/run_config.hpp"

namespace rpsim::sim::config {

using namespace train::config_json;
using nlohmann::json;

std::vector<int> positive_ints(const json& j, const std::string& path) {
  if (!j.is_array()) fail(path, "expected a list of integers, got " + describe(j));
  std::vector<int> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const long long v = integer(j[i], p);
    if (v < 1) fail(p, "must be positive, got " + std::to_string(v));
    out.push_back(int(v));
  }
  return out;
}

std::vector<std::int64_t> step_list(const json& j, const std::string& path) {
  if (!j.is_array()) fail(path, "expected a list of step numbers, got " + describe(j));
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const long long v = integer(j[i], p);
    if (v < 0) fail(p, "must be a step number >= 0");
    out.push_back(v);
  }
  return out;
}

double non_negative(const json& j, const std::string& path) {
  const double v = number(j, path);
  if (!(v >= 0) || !std::isfinite(v)) fail(path, "must be a finite number >= 0, got " + describe(j));
  return v;
}

long long at_least(const json& j, const std::string& path, long long low) {
  const long long v = integer(j, path);
  if (v < low) fail(path, fmt::format("must be at least {}, got {}", low, v));
  return v;
}

std::string one_of(const json& j, const std::string& path, const std::vector<std::string>& allowed) {
  const std::string s = string(j, path);
  if (std::find(allowed.begin(), allowed.end(), s) != allowed.end()) return s;
  fail(path, fmt::format("expected one of {}, got \"{}\"{}", fmt::join(allowed, ", "), s,
                         train::did_you_mean(s, allowed)));
}

std::int64_t steps_at(const json& j, const std::string& path) {
  return at_least(j, path, 0);
}

int size_at(const json& j, const std::string& path) {
  const long long v = at_least(j, path, 1);
  if (v > 1 << 20) fail(path, "must be at most 2^20, got " + std::to_string(v));
  return int(v);
}

int int_in(const json& j, const std::string& path, int low, int high) {
  const long long v = at_least(j, path, low);
  if (v > high) fail(path, fmt::format("must be at most {}, got {}", high, v));
  return int(v);
}

std::vector<std::string> model_names() {
  std::vector<std::string> n;
  for (const auto& m : train::model_types()) n.emplace_back(m.name);
  return n;
}

std::vector<std::string> data_names() {
  std::vector<std::string> n;
  for (const auto& d : train::data_sets()) n.emplace_back(d.name);
  return n;
}

std::vector<std::string> loss_names() {
  std::vector<std::string> n;
  for (const auto& o : train::ops())
    if (o.loss) n.emplace_back(o.name);
  return n;
}

}  // namespace rpsim::sim::config
