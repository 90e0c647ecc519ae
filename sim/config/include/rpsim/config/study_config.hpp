// A study's config file (experiments/configs/study-NAME.json), read by the
// config layer as every config is: JSON, "extends" resolved
// (config_file.hpp). Top-level fields are the full run; an optional "quick"
// object overrides fields for --quick. Getters throw std::invalid_argument
// (ConfigError) "FILE: FIELD: why", the config layer's one error format.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rpsim::sim::config {

class StudyConfig {
 public:
  StudyConfig() = default;
  StudyConfig(nlohmann::json file_json, std::string path, bool quick);
  static StudyConfig load(const std::filesystem::path& path, bool quick);

  const nlohmann::json& values() const { return effective_; }  // after the quick overrides
  const std::string& path() const { return path_; }

  bool has(std::string_view field) const;
  std::int64_t integer(std::string_view field) const;
  double number(std::string_view field) const;
  bool boolean(std::string_view field) const;
  std::string string(std::string_view field) const;
  std::vector<std::string> strings(std::string_view field) const;
  std::vector<double> numbers(std::string_view field) const;
  // Every field of this config must be one `reference` (the study's own
  // config) has, else a typo would be silently ignored: ConfigError naming
  // this file and every unknown field at once, with the nearest names.
  void check_fields(const StudyConfig& reference) const;
  // An error naming this file and `field`, for checks the getters cannot make.
  std::invalid_argument error(std::string_view field, std::string_view what) const;

 private:
  const nlohmann::json& at(std::string_view field) const;
  nlohmann::json effective_ = nlohmann::json::object();
  std::string path_ = "<built-in>";
};

}  // namespace rpsim::sim::config
