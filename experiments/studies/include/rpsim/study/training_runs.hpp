// Studies 3-5 train the same small network many times under different
// precision policies and loss scalers. A study config holds one base training
// config ("train", read as `rpsim train CONFIG.json` reads one, through
// train/config_loader.hpp) and a list of `--set` style assignments
// ("train_set") that --quick overrides to shrink it.
#pragma once

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rpsim/study/study.hpp"
#include "rpsim/train/trainer.hpp"

namespace rpsim::sim::study {

// A CSV text as the trainer writes it (no quoted cells).
struct TextTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  static TextTable parse(const std::string& text);
  // Index of `name`; throws std::logic_error naming it when absent.
  std::size_t column(const std::string& name) const;
  // Columns whose name ends with `suffix` (per-layer telemetry).
  std::vector<std::size_t> columns_ending(const std::string& suffix) const;
};

// The base training config of a study, in rpsim's vocabulary: "train" (an
// object, or a file beside the study config, in any vocabulary `rpsim train`
// reads) with the "train_set" assignments in its vocabulary, then each key of
// `patch` (a dotted path in rpsim's vocabulary) set to its value, replacing
// what was there.
nlohmann::json training_config(const StudyConfig& cfg,
                               const nlohmann::json& patch = nlohmann::json::object());

struct TrainingRun {
  train::RunResult result;
  TextTable steps, histograms;
  double final_accuracy_percent = -1, shadow_accuracy_percent = NAN;  // NaN: no shadow
};

// Parses `config` (errors name `where`, e.g. "study-underflow.json: run 'scale 8'") and trains in process.
TrainingRun run_training(const nlohmann::json& config, const std::string& where);

// meta.json facts shared by the training studies (data set, policies).
void describe_training(const TrainingRun& run, StudyOutput& out);

StudyOutput run_underflow(const StudyOptions& options);
StudyOutput run_loss_scale(const StudyOptions& options);
StudyOutput run_accuracy(const StudyOptions& options);
StudyOutput run_transformer(const StudyOptions& options);

}  // namespace rpsim::sim::study
