// A study's config: the file with "extends" resolved, its quick overrides,
// and typed getters whose errors name the file and the field.
#include "rpsim/config/study_config.hpp"

#include <fmt/format.h>

#include "rpsim/config/config_file.hpp"
#include "rpsim/config/config_keys.hpp"
#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::config {

using nlohmann::json;
using train::config_json::describe;

StudyConfig::StudyConfig(json file_json, std::string path, bool quick) : path_(std::move(path)) {
  if (!file_json.is_object())
    throw train::ConfigError(
        fmt::format("{}: the top level must be a JSON object, got {}", path_, describe(file_json)));
  effective_ = file_json;
  effective_.erase("quick");
  if (quick && file_json.contains("quick")) {
    const json& overrides = file_json.at("quick");
    if (!overrides.is_object()) throw error("quick", "expected an object, got " + describe(overrides));
    for (const auto& [key, value] : overrides.items()) effective_[key] = value;
  }
}

StudyConfig StudyConfig::load(const std::filesystem::path& path, bool quick) {
  return StudyConfig(read_config_tree(path), path.string(), quick);
}

void StudyConfig::check_fields(const StudyConfig& reference) const {
  std::vector<std::string> known{"quick", "comment"};
  for (const auto& [key, value] : reference.values().items()) known.push_back(key);
  KeyReport report;
  check_object_keys(effective_, known, "", report);
  try {
    report.throw_if_any();
  } catch (const train::ConfigError& e) {
    throw train::ConfigError(fmt::format("{}: {}", path_, e.what()));
  }
}

std::invalid_argument StudyConfig::error(std::string_view field, std::string_view what) const {
  return train::ConfigError(fmt::format("{}: {}: {}", path_, field, what));
}

bool StudyConfig::has(std::string_view field) const {
  return effective_.contains(std::string(field));
}

const json& StudyConfig::at(std::string_view field) const {
  const auto it = effective_.find(std::string(field));
  if (it == effective_.end()) throw error(field, "missing");
  return *it;
}

std::int64_t StudyConfig::integer(std::string_view field) const {
  const json& v = at(field);
  if (!v.is_number_integer()) throw error(field, "expected an integer, got " + describe(v));
  return v.get<std::int64_t>();
}

double StudyConfig::number(std::string_view field) const {
  const json& v = at(field);
  if (!v.is_number()) throw error(field, "expected a number, got " + describe(v));
  return v.get<double>();
}

bool StudyConfig::boolean(std::string_view field) const {
  const json& v = at(field);
  if (!v.is_boolean()) throw error(field, "expected true or false, got " + describe(v));
  return v.get<bool>();
}

std::string StudyConfig::string(std::string_view field) const {
  const json& v = at(field);
  if (!v.is_string()) throw error(field, "expected a string, got " + describe(v));
  return v.get<std::string>();
}

std::vector<std::string> StudyConfig::strings(std::string_view field) const {
  const json& v = at(field);
  std::vector<std::string> out;
  if (v.is_array())
    for (const json& e : v)
      if (e.is_string()) out.push_back(e.get<std::string>());
  if (!v.is_array() || out.size() != v.size() || out.empty())
    throw error(field, "expected a non-empty list of strings, got " + describe(v));
  return out;
}

std::vector<double> StudyConfig::numbers(std::string_view field) const {
  const json& v = at(field);
  std::vector<double> out;
  if (v.is_array())
    for (const json& e : v)
      if (e.is_number()) out.push_back(e.get<double>());
  if (!v.is_array() || out.size() != v.size() || out.empty())
    throw error(field, "expected a non-empty list of numbers, got " + describe(v));
  return out;
}

}  // namespace rpsim::sim::config
