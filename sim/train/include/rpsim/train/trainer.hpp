// The training simulator: a network trained under a precision policy, with
// an FP64 shadow (same initial weights, same batches, every op in binary64)
// stepped in lockstep, per-step telemetry and memory accounting.
//
//   auto config = train::parse_config(json);      // throws ConfigError naming the key
//   auto result = train::run(config, options);    // writes steps.csv, histograms.csv, meta.json
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rpsim/scaling/loss_scaler.hpp"
#include "rpsim/train/data.hpp"
#include "rpsim/train/layers.hpp"
#include "rpsim/train/memory.hpp"
#include "rpsim/train/optimizer.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::sim::train {

struct ModelConfig {
  std::string type = "mlp";           // mlp or cnn
  std::vector<int> hidden{256, 256};  // mlp: hidden widths
  std::string activation = "relu";    // relu or gelu
  bool layer_norm = false;            // mlp: LayerNorm after each hidden linear
  std::vector<int> channels{8, 16};   // cnn: conv(3x3, pad 1) + activation + maxpool(2) per entry
};

struct Config {
  std::string name = "run";
  std::uint64_t seed = 0;
  PrecisionPolicy policy;
  ModelConfig model;
  DataConfig data;
  OptimizerConfig optimizer;
  std::string loss = "cross_entropy";  // or mse_loss
  std::size_t batch_size = 128;
  int epochs = 1;
  std::int64_t steps = 0;    // > 0: stop after this many steps (epochs ignored)
  double max_grad_norm = 0;  // 0: no clipping
  ScalerConfig loss_scaler;
  bool shadow = true;
  std::vector<std::int64_t> histogram_steps{0};
  std::vector<std::int64_t> inject_overflow_steps;  // an inf placed in the first gradient at these steps
  std::size_t eval_batch_size = 1000;
  bool evaluate = true;
  nlohmann::json source;  // the configuration as read (after --set)
};

// Every key checked (unknown key, wrong type, unknown policy/format, lr < 0,
// batch_size 0, ...) before any work; ConfigError names the key path.
Config parse_config(const nlohmann::json& j);
// `--set a.b=value`: value parsed as JSON when it is JSON, else taken as a string.
void apply_override(nlohmann::json& j, const std::string& assignment);

struct RunOptions {
  std::filesystem::path out_dir;  // empty: write nothing
  std::FILE* progress = nullptr;  // progress lines (nullptr: silent)
  bool progress_is_terminal = false;
  int threads = 0;  // OpenMP threads, 0: default
};

struct Evaluation {
  std::int64_t step = 0;
  int epoch = 0;
  double test_accuracy_percent = 0;
  double shadow_test_accuracy_percent = -1;  // -1 without shadow
};

struct RunResult {
  bool interrupted = false;
  std::int64_t steps_done = 0;
  std::int64_t skipped_steps = 0;
  double final_loss = 0;
  double final_loss_scale = 1;
  std::vector<Evaluation> evaluations;
  MemoryReport memory;
  bool synthetic_data = false;
  std::string data_description;
  std::string steps_csv, histograms_csv;
  nlohmann::json meta;
};

// steps.csv, one row per step: step, epoch, loss_emulated_nats,
// loss_fp64_nats (empty without shadow), loss_scale, skipped, overflow_found,
// grad_norm, then for each layer with parameters (fc0, conv0, ln0, ...):
//   <layer>_weight_grad_underflow_fraction      entries of the layer's
//       parameter gradients that a rounding flushed to zero (nonzero before,
//       zero after): to the op's output and the gradient format in backward,
//       then in unscaling and clipping;
//   <layer>_weight_grad_nonfinite_fraction      inf/NaN entries after unscaling;
//   <layer>_activation_grad_underflow_fraction  entries of the gradient
//       arriving at the layer that a rounding flushed to zero: where the op
//       that produced it rounded its result, passed on through activations
//       and pooling, or in this layer's cast of it (FP8: e5m2);
//   <layer>_weight_rel_distance_from_fp64       ||w - w64|| / ||w64|| after the
//       update (empty without shadow);
//   <layer>_weight_grad_zero_vs_fp64_fraction,
//   <layer>_activation_grad_zero_vs_fp64_fraction  entries zero in the
//       emulated run but nonzero in the FP64 shadow: underflow plus every
//       other difference in zeros once the runs diverge (ReLU masks), empty
//       without shadow.
RunResult run(const Config& config, const RunOptions& options);

// A model of `config` for inputs of `data`'s shape with deterministic
// PyTorch-style initialisation rounded to the policy's storage format.
struct Model {
  std::vector<std::unique_ptr<Layer>> layers;
  std::unique_ptr<Loss> loss;
  std::vector<Parameter*> parameters();
  Model clone() const;
};
Model build_model(const Config& config, const Dataset& data);

}  // namespace rpsim::sim::train
