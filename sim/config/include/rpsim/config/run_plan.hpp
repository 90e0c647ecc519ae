// What a training run will do, worked out from its config before any work:
// the block `rpsim train` prints first (model, data and where it comes from,
// policy, scaler, steps, output, what a framework config contributed and
// what was ignored, the memory it needs, a time estimate), and the estimate that sweeps and
// studies add up.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rpsim/config/config.hpp"
#include "rpsim/config/config_loader.hpp"

namespace rpsim::sim::config {

struct RunPlan {
  std::size_t train_samples = 0, test_samples = 0;
  bool synthetic_data = false;
  std::string data_source;  // "Fashion-MNIST IDX files in DIR" or why synthetic
  std::int64_t steps_per_epoch = 0, total_steps = 0;
  int evaluations = 0;
  std::int64_t parameters = 0;
  double forward_multiply_adds = 0;  // per sample, the forward matmuls (ModelSize's)
  double estimate_s = 0;             // wall time on one core of this project's machine (see run_plan.cpp)
  double memory_bytes = 0;           // what the run holds at its peak (memory_need_bytes)
  // A text set as read for the plan (its vocabulary is the model's
  // shape): RunOptions::data, so the run reads it no second time.
  std::shared_ptr<const train::DataSplit> data;
};

// memory_need_bytes and check_run_fits: rpsim/train/run_config.hpp (the
// trainer checks them too).

RunPlan plan_run(const train::Config& config);

// The block, one item per line, each line starting with two spaces.
// `out_dir` is where results go.
std::string describe_run(const LoadedConfig& loaded, const train::Config& config, const RunPlan& plan,
                         const std::string& out_dir);

}  // namespace rpsim::sim::config
