// Unknown keys in a configuration, reported all at once, each with the
// nearest names the config could have meant ("did you mean") and, where
// another vocabulary has the key (a DeepSpeed name in an rpsim config or the
// reverse), the name this config's vocabulary uses for it.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::config {

// The error and the name suggestions are the simulator's (its tables' own
// errors use them too): one type whichever layer throws.
using train::ConfigError;
using train::did_you_mean;
using train::nearest_names;

// The problems found in one configuration. ConfigError lists them all.
class KeyReport {
 public:
  // The vocabulary the config is written in ("rpsim" or "deepspeed"): a key
  // of the other one gets a hint naming this one's key.
  explicit KeyReport(std::string vocabulary = "rpsim") : vocabulary_(std::move(vocabulary)) {}

  // `path` is the dotted key, `known` the names allowed beside it.
  void unknown(const std::string& path, const std::vector<std::string>& known);
  void problem(const std::string& message) { problems_.push_back(message); }
  bool empty() const { return problems_.empty(); }
  const std::vector<std::string>& problems() const { return problems_; }
  const std::string& vocabulary() const { return vocabulary_; }
  // Throws ConfigError: the one problem, or "N problems:" and one per line.
  void throw_if_any() const;

 private:
  std::string vocabulary_;
  std::vector<std::string> problems_;
};

// Every key of object `j` that is not in `known` goes to `report`; false when
// `j` is not an object (reported too).
bool check_object_keys(const nlohmann::json& j, const std::vector<std::string>& known,
                       const std::string& path, KeyReport& report);

}  // namespace rpsim::sim::config
