// Running the training simulator in process for the training studies.
#include <fmt/format.h>

#include <sstream>
#include <stdexcept>

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
  if (!cfg.has("train") || !cfg.values().at("train").is_object())
    throw cfg.error("train", "must be a training config object (as for `rpsim train`)");
  nlohmann::json j = cfg.values().at("train");
  // An empty list is allowed here: the full run may need no assignment.
  const bool any = cfg.has("train_set") &&
                   !(cfg.values().at("train_set").is_array() && cfg.values().at("train_set").empty());
  if (any)
    for (const auto& assignment : cfg.strings("train_set")) {
      try {
        train::apply_override(j, assignment);
      } catch (const std::exception& e) {
        throw cfg.error("train_set", fmt::format("has a bad assignment '{}': {}", assignment, e.what()));
      }
    }
  j.merge_patch(patch);
  return j;
}

TrainingRun run_training(const nlohmann::json& config, const std::string& where) {
  train::Config parsed;
  try {
    parsed = train::parse_config(config);
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("{}: {}", where, e.what()));
  }
  train::RunOptions options;  // no out_dir: the study writes its own tables
  TrainingRun run;
  run.result = train::run(parsed, options);
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
  if (run.result.synthetic_data)
    out.findings.push_back("WARNING: Fashion-MNIST not found; trained on the synthetic stand-in");
}

}  // namespace rpsim::sim::study
