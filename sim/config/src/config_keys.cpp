// Unknown keys with the nearest known names and values of the wrong type,
// reported together.
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

namespace {

// The element type of a list type (any for a list of anything).
KeyType element_type(KeyType type) {
  switch (type) {
    case KeyType::integers: return KeyType::integer;
    case KeyType::numbers: return KeyType::number;
    case KeyType::texts: return KeyType::text;
    default: return KeyType::any;
  }
}

bool is_list(KeyType type) {
  return type == KeyType::integers || type == KeyType::numbers || type == KeyType::texts ||
         type == KeyType::list;
}

// Reports the wrong type at `path`, or (for a list) each wrong element.
void check_type(const nlohmann::json& v, KeyType type, const std::string& path, KeyReport& report) {
  if (!is_list(type) || !v.is_array() || (type == KeyType::list && v.empty())) {
    if (!has_type(v, type))
      report.problem(
          fmt::format("{}: expected {}, got {}", path, type_phrase(type), config_json::describe(v)));
    return;
  }
  for (std::size_t i = 0; i < v.size(); ++i)
    check_type(v[i], element_type(type), fmt::format("{}[{}]", path, i), report);
}

}  // namespace

std::string type_phrase(KeyType type) {
  switch (type) {
    case KeyType::any: return "any value";
    case KeyType::text: return "a string";
    case KeyType::integer: return "an integer";
    case KeyType::number: return "a number";
    case KeyType::flag: return "true or false";
    case KeyType::integers: return "a list of integers";
    case KeyType::numbers: return "a list of numbers";
    case KeyType::texts: return "a list of strings";
    case KeyType::list: return "a non-empty list";
    case KeyType::object: return "an object";
    case KeyType::text_or_object: return "a name or an object";
    case KeyType::text_or_null: return "a string or null";
    case KeyType::accumulation:
      return "an accumulation model spec string (e.g. \"tc:h100:fp16:fp32\") or object";
  }
  return "?";
}

bool has_type(const nlohmann::json& v, KeyType type) {
  switch (type) {
    case KeyType::any: return true;
    case KeyType::text: return v.is_string();
    case KeyType::integer: return config_json::is_integer(v);
    case KeyType::number: return v.is_number();
    case KeyType::flag: return v.is_boolean();
    case KeyType::list: return v.is_array() && !v.empty();
    case KeyType::object: return v.is_object();
    case KeyType::text_or_object:
    case KeyType::accumulation: return v.is_string() || v.is_object();
    case KeyType::text_or_null: return v.is_string() || v.is_null();
    case KeyType::integers:
    case KeyType::numbers:
    case KeyType::texts:
      return v.is_array() && std::all_of(v.begin(), v.end(), [&](const nlohmann::json& e) {
               return has_type(e, element_type(type));
             });
  }
  return false;
}

bool check_keys(const nlohmann::json& j, std::span<const KeySpec> keys, const std::string& path,
                KeyReport& report, const std::vector<std::string>& also_known) {
  std::vector<std::string> known;
  for (const KeySpec& k : keys) known.emplace_back(k.name);
  known.insert(known.end(), also_known.begin(), also_known.end());
  if (!check_object_keys(j, known, path, report)) return false;
  for (const KeySpec& k : keys)
    if (j.contains(k.name)) check_type(j[k.name], k.type, config_json::join(path, k.name), report);
  return true;
}

}  // namespace rpsim::sim::config
