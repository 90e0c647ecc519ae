// The study suite: each study answers one published question by running the
// simulator, and writes CSV tables plus meta.json into one folder
// (results/<study>/ by default) that the numbered notebooks read.
//
// A study is a function from options (quick or full, its config file) to
// tables; this file holds what every study shares: the registry, the config
// (read by the config layer: rpsim/config/study_config.hpp), CSV tables, and the
// writer that puts every file down atomically, meta.json last (its presence
// means the folder is complete).
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rpsim/config/study_config.hpp"

namespace rpsim::sim::study {

// A study's config file: the config layer reads it (resolving "extends").
using config::StudyConfig;

// A table of results built in memory; every value is written with enough
// digits to round-trip (doubles with 17 significant digits).
class CsvTable {
 public:
  explicit CsvTable(std::vector<std::string> columns) : columns_(std::move(columns)) {}

  template <class... Values>
  void row(const Values&... values) {
    static_assert(sizeof...(Values) > 0);
    std::vector<std::string> cells;
    cells.reserve(sizeof...(Values));
    (cells.push_back(cell(values)), ...);
    add_row(std::move(cells));
  }
  void add_row(std::vector<std::string> cells);  // throws if the width is wrong

  const std::vector<std::string>& columns() const { return columns_; }
  std::size_t size() const { return rows_.size(); }
  std::string str() const;

 private:
  static std::string cell(const std::string& s) { return s; }
  static std::string cell(const char* s) { return s; }
  static std::string cell(std::string_view s) { return std::string(s); }
  static std::string cell(bool b) { return b ? "true" : "false"; }
  static std::string cell(double v);
  static std::string cell(float v) { return cell(double(v)); }
  template <class Int>
  requires std::is_integral_v<Int>
  static std::string cell(Int v) { return std::to_string(v); }

  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

struct StudyOptions {
  bool quick = false;
  std::filesystem::path out_dir;  // the study's own folder
  StudyConfig config;
};

// What a study produced; `meta` holds its own facts (formats, data_set, seed,
// models) and run_study adds the common ones.
struct StudyOutput {
  // A deque: table() hands out references that later tables must not move.
  std::deque<std::pair<std::string, CsvTable>> tables;  // file name -> table
  nlohmann::json meta = nlohmann::json::object();
  std::vector<std::string> findings;  // one line each, printed by the CLI

  CsvTable& table(const std::string& file, std::vector<std::string> columns);
};

using StudyFunction = StudyOutput (*)(const StudyOptions&);

struct StudyInfo {
  std::string name;      // "summation": the CLI name, folder and config file stem
  std::string question;  // the one question it answers
  StudyFunction run;
};

// The default suite, in reading order (the notebooks' numbering).
const std::vector<StudyInfo>& studies();
// Throws std::invalid_argument listing the known names.
const StudyInfo& find_study(std::string_view name);

// Runs `info` and writes its tables then meta.json atomically into
// options.out_dir. meta.json: study, question, quick, config_file, config,
// seed, git_commit, formats, data_set, wall_time_s, files, findings, plus the
// study's own fields.
StudyOutput run_study(const StudyInfo& info, const StudyOptions& options);

}  // namespace rpsim::sim::study
