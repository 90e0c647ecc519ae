// Config files: JSON, and the "extends" chain (config_file.hpp).
#include "rpsim/config/config_file.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "rpsim/io/json_keys.hpp"
#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::config {

using nlohmann::json;
using train::ConfigError;

namespace {

// Deep enough for variant-of-a-variant chains; a loop stops here.
constexpr int kMaxDepth = 8;

// "FILE: " ("" for JSON from no file: its reader names it).
std::string in_file(const std::filesystem::path& file) {
  return file.empty() ? std::string() : file.string() + ": ";
}

json resolve_at(json j, const std::filesystem::path& file, int depth) {
  if (!j.is_object() || !j.contains("extends")) return j;
  const json& e = j.at("extends");
  if (!e.is_string() || e.get<std::string>().empty())
    throw ConfigError(fmt::format("{}extends: expected a config file name, got {}", in_file(file),
                                  train::config_json::describe(e)));
  if (depth >= kMaxDepth)
    throw ConfigError(fmt::format("{}extends: nests more than {} deep (a loop?)", in_file(file), kMaxDepth));
  const std::filesystem::path base_path = file.parent_path() / e.get<std::string>();
  json base;
  try {
    base = read_json_file(base_path);
  } catch (const ConfigError& err) {
    throw ConfigError(in_file(file) + "extends: " + err.what());
  }
  base = resolve_at(std::move(base), base_path, depth + 1);
  if (!base.is_object())
    throw ConfigError(fmt::format("{}extends: {} is {}, not a config object", in_file(file),
                                  base_path.string(), train::config_json::describe(base)));
  j.erase("extends");
  base.merge_patch(j);
  return base;
}

}  // namespace

json read_json_file(const std::filesystem::path& file) {
  const std::string where = file.string();
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw ConfigError(where +
                      ": is a folder, not a config file (a JSON file such as experiments/configs/"
                      "mlp-fp32.json)");
  std::ifstream in(file);
  if (!in) throw ConfigError(where + ": cannot open the config file");
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number such as 1e999.
    throw ConfigError(fmt::format("{}: not valid JSON: {}", where, e.what()));
  }
  if (const std::string key = io::duplicate_json_key(text.str()); !key.empty())
    throw ConfigError(fmt::format("{}: {}", where, io::duplicate_json_key_message(key)));
  return j;
}

json resolve_extends(json j, const std::filesystem::path& file) {
  return resolve_at(std::move(j), file, 0);
}

json read_config_tree(const std::filesystem::path& file) {
  return resolve_extends(read_json_file(file), file);
}

}  // namespace rpsim::sim::config
