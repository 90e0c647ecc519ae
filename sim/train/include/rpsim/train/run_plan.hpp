// What a training run will do, worked out from its config before any work:
// the block `rpsim train` prints first (model, data and where it comes from,
// policy, scaler, steps, output, what a framework config contributed and
// what was ignored, the memory it needs, a time estimate), and the estimate that sweeps and
// studies add up.
#pragma once

#include <cstdint>
#include <string>

#include "rpsim/train/config_loader.hpp"
#include "rpsim/train/trainer.hpp"

namespace rpsim::sim::train {

struct RunPlan {
  std::size_t train_samples = 0, test_samples = 0;
  bool synthetic_data = false;
  std::string data_source;  // "Fashion-MNIST IDX files in DIR" or why synthetic
  std::int64_t steps_per_epoch = 0, total_steps = 0;
  int evaluations = 0;
  std::int64_t parameters = 0;
  double forward_multiply_adds = 0;  // per sample, the matmuls (linear, conv) only
  double estimate_s = 0;             // wall time on one core of this project's machine (see run_plan.cpp)
  double memory_bytes = 0;           // what the run holds at its peak (memory_need_bytes)
};

// The bytes a run of `config` holds at its peak, from the config and the
// data's shape (`shape`: a set of the data's kind; its samples are not read).
double memory_need_bytes(const Config& config, const Dataset& shape);

// Throws ConfigError when the run cannot start: a batch larger than the
// training set (`train_samples`) or a need above this machine's memory.
void check_run_fits(const Config& config, std::size_t train_samples, double memory_bytes);

RunPlan plan_run(const Config& config);

// The block, one item per line, each line starting with two spaces.
// `out_dir` is where results go.
std::string describe_run(const LoadedConfig& loaded, const Config& config, const RunPlan& plan,
                         const std::string& out_dir);

}  // namespace rpsim::sim::train
