// What a training run will do, worked out from its config before any work:
// the block `rpsim train` prints first (model, data and where it comes from,
// policy, scaler, steps, output, what a framework config contributed and
// what was ignored, the memory it needs, a time estimate), and the estimate that sweeps and
// studies add up.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
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

// The time estimate's figures, one row per model type plus the terms every
// run has (run_plan.cpp says where and how each was measured).
struct ModelCost {
  const char* model;                // a row of the model table
  double seconds_per_multiply_add;  // of a training step's matmuls, fp32 with the FP64 shadow
};
struct PlanRates {
  std::span<const ModelCost> models;
  double per_parameter, per_step;         // seconds per parameter per step, and per step
  double policy_factor;                   // a step under a policy narrower than binary32
  double fp8_factor;                      // a step under an FP8 policy
  double no_shadow_factor;                // a step without the FP64 shadow
  double load_fashion_mnist, load_other;  // reading the data, once
};
const PlanRates& plan_rates();
// RunPlan::estimate_s is this with plan_rates(); other rates price the same
// plan (a test changes one row and sees the estimate move).
double estimate_seconds(const train::Config& config, const RunPlan& plan, const PlanRates& rates);

// The block, one item per line, each line starting with two spaces.
// `out_dir` is where results go.
std::string describe_run(const LoadedConfig& loaded, const train::Config& config, const RunPlan& plan,
                         const std::string& out_dir);

}  // namespace rpsim::sim::config
