// Running the training simulator in process for the training studies.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "rpsim/config/config_file.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/io/progress.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/study/training_runs.hpp"
#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::study {

TextTable TextTable::parse(const std::string& text) {
  TextTable t;
  std::istringstream in(text);
  std::string line;
  const auto split = [](const std::string& l) {
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(l);
    while (std::getline(ls, cell, ',')) cells.push_back(cell);
    if (!l.empty() && l.back() == ',') cells.emplace_back();
    return cells;
  };
  if (std::getline(in, line)) t.columns = split(line);
  while (std::getline(in, line))
    if (!line.empty()) t.rows.push_back(split(line));
  return t;
}

std::size_t TextTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return i;
  throw std::logic_error("training output has no column '" + name + "'");
}

std::vector<std::size_t> TextTable::columns_ending(const std::string& suffix) const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < columns.size(); ++i)
    if (columns[i].size() >= suffix.size() &&
        columns[i].compare(columns[i].size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(i);
  return out;
}

nlohmann::json training_config(const StudyConfig& cfg, const nlohmann::json& patch) {
  if (!cfg.has("train") || !(cfg.values().at("train").is_object() || cfg.values().at("train").is_string()))
    throw cfg.error("train", "must be a training config (as for `rpsim train`): an object or a file name");
  const nlohmann::json& train = cfg.values().at("train");
  std::vector<std::string> sets;
  // An empty list is allowed here: the full run may need no assignment.
  if (cfg.has("train_set") &&
      !(cfg.values().at("train_set").is_array() && cfg.values().at("train_set").empty()))
    sets = cfg.strings("train_set");
  // Read as `rpsim train` reads a config, train_set as its --set; an object
  // may extend a config file named relative to the study's.
  config::LoadedConfig loaded;
  try {
    loaded = train.is_string()
                 ? config::read_config_file(
                       std::filesystem::path(cfg.path()).parent_path() / train.get<std::string>(), sets)
                 : config::read_config_json(config::resolve_extends(train, cfg.path()), "train", sets);
  } catch (const train::ConfigError& e) {
    throw std::invalid_argument(fmt::format("config '{}': {}", cfg.path(), e.what()));
  }
  // The study's own settings, in rpsim's vocabulary, replace what they name.
  for (const auto& [key, value] : patch.items()) {
    try {
      config::set_config_path(loaded.config, key, value);
    } catch (const train::ConfigError& e) {
      throw std::invalid_argument(fmt::format("config '{}': {}", cfg.path(), e.what()));
    }
  }
  return loaded.config;
}

TrainingRun run_training(const nlohmann::json& config, const std::string& where) {
  train::Config parsed;
  try {
    parsed = config::parse_config(config);
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("{}: {}", where, e.what()));
  }
  train::RunOptions options;  // no out_dir: the study writes its own tables
  // Each run's progress on stderr (the first line 2 s in, then every 10 s).
  io::ProgressLine line(stderr, isatty(fileno(stderr)), where, "steps");
  options.on_step = [&line](const train::StepReport& r) { line.update(r.step, r.total_steps); };
  TrainingRun run;
  run.result = train::run(parsed, options);
  line.finish();
  // A truncated run must not become a row of the study's tables.
  if (run.result.interrupted)
    throw io::Interrupted(fmt::format("{}: stopped by interrupt at step {}; nothing of this study written",
                                      where, run.result.steps_done));
  run.steps = TextTable::parse(run.result.steps_csv);
  run.histograms = TextTable::parse(run.result.histograms_csv);
  if (!run.result.evaluations.empty()) {
    run.final_accuracy_percent = run.result.evaluations.back().test_accuracy_percent;
    run.shadow_accuracy_percent = run.result.evaluations.back().shadow_test_accuracy_percent;
  }
  return run;
}

void describe_training(const TrainingRun& run, StudyOutput& out) {
  out.meta["data_set"] = run.result.data_description;
  out.meta["synthetic_data"] = run.result.synthetic_data;
  if (run.result.synthetic_data) out.findings.push_back("WARNING: " + run.result.data_description);
}

}  // namespace rpsim::sim::study
