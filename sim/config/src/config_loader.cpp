// Reading a training config in any vocabulary, with overrides, into rpsim's.
#include "rpsim/config/config_loader.hpp"

#include <fmt/format.h>

#include "policy_read.hpp"
#include "rpsim/config/config_file.hpp"
#include "rpsim/config/config_keys.hpp"
#include "rpsim/config/framework_config.hpp"
#include "rpsim/io/json_keys.hpp"
#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
namespace {

using nlohmann::json;

[[noreturn]] void rethrow_in(const std::string& where, const ConfigError& e) {
  throw ConfigError(where + ": " + e.what());
}

template <class Setting>
LoadedConfig load(const json& raw, const std::string& where, const std::vector<Setting>& settings,
                  void (*apply)(json&, const Setting&)) {
  LoadedConfig l;
  l.where = where;
  try {
    // JSON from no file (a Python dict, a sweep's grid point) names its
    // bases relative to the working folder; a file's are resolved by now.
    l.raw = resolve_extends(raw, "");
    // The vocabulary is the file's, before any override: a key of the other
    // vocabulary given with --set is then an unknown key with a hint.
    l.vocabulary = recognise_vocabulary(l.raw).name;
    for (const auto& s : settings) apply(l.raw, s);
    KeyReport report(l.vocabulary);
    Translation t;
    try {
      t = translate_framework_config(l.raw, l.vocabulary, report);
    } catch (const ConfigError& e) {
      // A bad value stops the translation; the unknown keys found before it
      // are named with it, all at once (a user fixed scheduler.params and
      // only then learned of fp16.enabld).
      report.problem(e.what());
      report.throw_if_any();
    }
    if (t.config.is_object()) check_config_keys(t.config, report, framework_extension_keys());
    report.throw_if_any();
    l.config = std::move(t.config);
    l.ignored = std::move(t.ignored);
    l.notes = std::move(t.notes);
  } catch (const ConfigError& e) {
    rethrow_in(where, e);
  }
  return l;
}

void apply_text(json& j, const std::string& assignment) {
  apply_override(j, assignment);
}

void apply_pair(json& j, const std::pair<std::string, json>& setting) {
  set_config_path(j, setting.first, setting.second);
}

}  // namespace

std::pair<std::string, json> parse_assignment(const std::string& assignment) {
  // Config files are valid UTF-8 (the JSON parser checks); an override must
  // be too, or every later message and meta.json that shows it would fail.
  try {
    (void)json(assignment).dump();
  } catch (const json::type_error&) {
    throw ConfigError("--set " + config_json::describe(json(assignment)) + ": not valid UTF-8");
  }
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set " + assignment + ": expected key=value (e.g. optimizer.lr=0.1)");
  const std::string text = assignment.substr(eq + 1);
  json value;
  try {
    value = json::parse(text);
  } catch (const json::exception&) {
    value = text;
  }
  if (const std::string key = io::duplicate_json_key(text); !key.empty())
    throw ConfigError("--set " + assignment.substr(0, eq) + ": " + io::duplicate_json_key_message(key));
  return {assignment.substr(0, eq), value};
}

void set_config_path(json& j, const std::string& key, const json& value) {
  json* node = &j;
  std::string walked;
  for (std::size_t start = 0;;) {
    const std::size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) throw ConfigError(key + ": empty key component");
    if (node->is_null()) *node = json::object();
    // A named policy is shorthand for {"name": ...}: policy.accumulation
    // refines the policy the config names.
    if (walked == "policy" && node->is_string()) *node = json{{"name", *node}};
    if (!node->is_object())
      throw ConfigError(fmt::format("{}: {} is {}, not an object", key,
                                    walked.empty() ? "the config" : walked, config_json::describe(*node)));
    if (dot == std::string::npos) {
      (*node)[part] = value;
      return;
    }
    node = &(*node)[part];
    walked = config_json::join(walked, part);
    start = dot + 1;
  }
}

void apply_override(json& j, const std::string& assignment) {
  const auto [key, value] = parse_assignment(assignment);
  try {
    set_config_path(j, key, value);
  } catch (const ConfigError& e) {
    throw ConfigError(std::string("--set ") + e.what());
  }
}

Config LoadedConfig::parse() const {
  try {
    // The loader checked every key of `config` (names and types) already;
    // a LoadedConfig made otherwise gets the whole check.
    return config.is_object() ? read_checked_config(config) : parse_config(config);
  } catch (const ConfigError& e) {
    rethrow_in(where, e);
  }
}

LoadedConfig read_config_json(const json& raw, const std::string& where,
                              const std::vector<std::string>& overrides) {
  return load<std::string>(raw, where, overrides, apply_text);
}

LoadedConfig read_config_json(const json& raw, const std::string& where,
                              const std::vector<std::pair<std::string, json>>& settings) {
  return load<std::pair<std::string, json>>(raw, where, settings, apply_pair);
}

LoadedConfig read_config_file(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  json own = read_json_file(file);
  // A variant that does not name itself writes results/<its own stem>, not
  // into its base's folder.
  const bool named = own.is_object() && own.contains("name");
  json raw = resolve_extends(std::move(own), file);
  if (!named && raw.is_object()) raw.erase("name");
  LoadedConfig l = read_config_json(raw, file.string(), overrides);
  if (l.config.is_object() && !l.config.contains("name")) l.config["name"] = file.stem().string();
  return l;
}

}  // namespace rpsim::sim::config
