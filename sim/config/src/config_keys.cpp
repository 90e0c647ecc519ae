// Unknown keys with the nearest known names, reported together.
#include "rpsim/config/config_keys.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "rpsim/config/framework_config.hpp"
#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
void KeyReport::unknown(const std::string& path, const std::vector<std::string>& known) {
  const auto dot = path.rfind('.');
  const std::string key = dot == std::string::npos ? path : path.substr(dot + 1);
  std::string message = path + ": unknown key" + did_you_mean(key, known);
  const std::string hint = vocabulary_hint(path, vocabulary_);
  if (!hint.empty()) message += "; " + hint;
  // A short list helps; DeepSpeed's sixty names would bury the message.
  if (known.size() <= 20) message += fmt::format(" [known here: {}]", fmt::join(known, ", "));
  problems_.push_back(message);
}

void KeyReport::throw_if_any() const {
  if (problems_.empty()) return;
  if (problems_.size() == 1) throw ConfigError(problems_.front());
  std::string text = fmt::format("{} problems:", problems_.size());
  for (const auto& p : problems_) text += "\n  " + p;
  throw ConfigError(text);
}

bool check_object_keys(const nlohmann::json& j, const std::vector<std::string>& known,
                       const std::string& path, KeyReport& report) {
  if (!j.is_object()) {
    report.problem((path.empty() ? "config" : path) + ": expected an object, got " +
                   config_json::describe(j));
    return false;
  }
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find(known.begin(), known.end(), it.key()) == known.end())
      report.unknown(config_json::join(path, it.key()), known);
  return true;
}

}  // namespace rpsim::sim::config
