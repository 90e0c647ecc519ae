// The shared parts of the study suite: CSV tables and the atomic writer of a
// study's folder. Its config is read by the config layer (study_config.cpp).
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "rpsim/io/results_io.hpp"
#include "rpsim/io/run_info.hpp"
#include "rpsim/study/study.hpp"

namespace rpsim::sim::study {

using nlohmann::json;

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
  const bool existed = std::filesystem::exists(options.out_dir);
  io::ensure_writable_dir(options.out_dir);
  const auto start = std::chrono::steady_clock::now();
  StudyOutput out;
  try {
    out = info.run(options);
  } catch (...) {
    // A study reads its config's fields as it goes, so a bad one stops it
    // after the folder was made: a run that wrote nothing (tables are
    // written at the end) leaves no empty folder of its own behind.
    std::error_code ec;
    if (!existed && std::filesystem::is_empty(options.out_dir, ec) && !ec)
      std::filesystem::remove(options.out_dir, ec);
    throw;
  }
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
