// The shared parts of the study suite: config reading, CSV tables, and the
// atomic writer of a study's folder.
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>

#include "rpsim/io/results_io.hpp"
#include "rpsim/io/run_info.hpp"
#include "rpsim/study/study.hpp"

namespace rpsim::sim::study {

using nlohmann::json;

StudyConfig::StudyConfig(json file_json, std::string path, bool quick) : path_(std::move(path)) {
  if (!file_json.is_object())
    throw std::invalid_argument(fmt::format("config '{}': the top level must be a JSON object", path_));
  effective_ = file_json;
  effective_.erase("quick");
  if (quick && file_json.contains("quick")) {
    const json& overrides = file_json.at("quick");
    if (!overrides.is_object())
      throw std::invalid_argument(fmt::format("config '{}': field 'quick' must be an object", path_));
    for (const auto& [key, value] : overrides.items()) effective_[key] = value;
  }
}

namespace {

json read_config_json(const std::filesystem::path& path) {
  if (std::filesystem::is_directory(path))
    throw std::invalid_argument(fmt::format("config '{}' is a directory, not a file", path.string()));
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("cannot open config file '{}'", path.string()));
  try {
    return json::parse(in);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999
    throw std::invalid_argument(fmt::format("config '{}': not valid JSON: {}", path.string(), e.what()));
  }
}

// "extends": FILE (relative to this config's folder): that config with this
// one applied as a JSON merge patch (RFC 7386: objects merge key by key, a
// null removes the key, anything else replaces it), so a variant of a study
// names only what it changes. A base may extend another, up to 8 deep.
json resolve_extends(json j, const std::filesystem::path& path, int depth = 0) {
  if (!j.is_object() || !j.contains("extends")) return j;
  const json& e = j.at("extends");
  if (!e.is_string())
    throw std::invalid_argument(fmt::format("config '{}': field 'extends' must be a config file name, not {}",
                                            path.string(), e.dump()));
  if (depth >= 8)
    throw std::invalid_argument(
        fmt::format("config '{}': field 'extends' nests more than 8 deep", path.string()));
  const std::filesystem::path base_path = path.parent_path() / e.get<std::string>();
  json base = resolve_extends(read_config_json(base_path), base_path, depth + 1);
  j.erase("extends");
  base.merge_patch(j);
  return base;
}

}  // namespace

StudyConfig StudyConfig::load(const std::filesystem::path& path, bool quick) {
  return StudyConfig(resolve_extends(read_config_json(path), path), path.string(), quick);
}

std::invalid_argument StudyConfig::error(std::string_view field, std::string_view what) const {
  return std::invalid_argument(fmt::format("config '{}': field '{}' {}", path_, field, what));
}

bool StudyConfig::has(std::string_view field) const {
  return effective_.contains(std::string(field));
}

const json& StudyConfig::at(std::string_view field) const {
  const auto it = effective_.find(std::string(field));
  if (it == effective_.end()) throw error(field, "is missing");
  return *it;
}

std::int64_t StudyConfig::integer(std::string_view field) const {
  const json& v = at(field);
  if (!v.is_number_integer()) throw error(field, fmt::format("must be an integer, not {}", v.dump()));
  return v.get<std::int64_t>();
}

double StudyConfig::number(std::string_view field) const {
  const json& v = at(field);
  if (!v.is_number()) throw error(field, fmt::format("must be a number, not {}", v.dump()));
  return v.get<double>();
}

bool StudyConfig::boolean(std::string_view field) const {
  const json& v = at(field);
  if (!v.is_boolean()) throw error(field, fmt::format("must be true or false, not {}", v.dump()));
  return v.get<bool>();
}

std::string StudyConfig::string(std::string_view field) const {
  const json& v = at(field);
  if (!v.is_string()) throw error(field, fmt::format("must be a string, not {}", v.dump()));
  return v.get<std::string>();
}

std::vector<std::string> StudyConfig::strings(std::string_view field) const {
  const json& v = at(field);
  std::vector<std::string> out;
  if (v.is_array())
    for (const json& e : v)
      if (e.is_string()) out.push_back(e.get<std::string>());
  if (!v.is_array() || out.size() != v.size() || out.empty())
    throw error(field, fmt::format("must be a non-empty array of strings, not {}", v.dump()));
  return out;
}

std::vector<double> StudyConfig::numbers(std::string_view field) const {
  const json& v = at(field);
  std::vector<double> out;
  if (v.is_array())
    for (const json& e : v)
      if (e.is_number()) out.push_back(e.get<double>());
  if (!v.is_array() || out.size() != v.size() || out.empty())
    throw error(field, fmt::format("must be a non-empty array of numbers, not {}", v.dump()));
  return out;
}

void CsvTable::add_row(std::vector<std::string> cells) {
  if (cells.size() != columns_.size())
    throw std::logic_error(fmt::format("CSV row has {} cells for {} columns", cells.size(), columns_.size()));
  rows_.push_back(std::move(cells));
}

std::string CsvTable::cell(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.17g}", v);
}

std::string CsvTable::str() const {
  std::string out;
  const auto line = [&out](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i) out += ',';
      // Quote a cell only when it needs it (specs like "blocked:32" do not).
      if (cells[i].find_first_of(",\"\n") != std::string::npos) {
        out += '"';
        for (char c : cells[i]) out += c == '"' ? std::string("\"\"") : std::string(1, c);
        out += '"';
      } else {
        out += cells[i];
      }
    }
    out += '\n';
  };
  line(columns_);
  for (const auto& r : rows_) line(r);
  return out;
}

CsvTable& StudyOutput::table(const std::string& file, std::vector<std::string> columns) {
  for (auto& [name, t] : tables)
    if (name == file) return t;
  tables.emplace_back(file, CsvTable(std::move(columns)));
  return tables.back().second;
}

const StudyInfo& find_study(std::string_view name) {
  std::string known;
  for (const StudyInfo& s : studies()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw std::invalid_argument(fmt::format("unknown study '{}' (known: {}, all)", name, known));
}

StudyOutput run_study(const StudyInfo& info, const StudyOptions& options) {
  io::ensure_writable_dir(options.out_dir);
  const auto start = std::chrono::steady_clock::now();
  StudyOutput out = info.run(options);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  json files = json::array();
  for (const auto& [name, table] : out.tables) {
    io::write_atomic(options.out_dir / name, table.str());
    files.push_back(name);
  }
  json meta = out.meta;
  meta["study"] = info.name;
  meta["question"] = info.question;
  meta["quick"] = options.quick;
  meta["config_file"] = options.config.path();
  meta["config"] = options.config.values();
  if (!meta.contains("seed"))
    meta["seed"] = options.config.has("seed") ? json(options.config.integer("seed")) : json(nullptr);
  if (!meta.contains("formats")) meta["formats"] = json::array();
  if (!meta.contains("data_set")) meta["data_set"] = nullptr;
  meta["git_commit"] = io::git_commit();
  meta["wall_time_s"] = wall;
  meta["files"] = files;
  meta["findings"] = out.findings;
  meta["finished_utc"] = io::utc_timestamp();
  io::write_atomic(options.out_dir / "meta.json", meta.dump(2) + "\n");
  return out;
}

}  // namespace rpsim::sim::study
