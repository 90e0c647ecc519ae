// The typed description of one training run: what the trainer, the model
// table and the memory check take. Nothing here reads a file or JSON; the
// config layer above (sim/config: parse_config, the loader, the framework
// vocabularies) fills it in and checks every key first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rpsim/scaling/loss_scaler.hpp"
#include "rpsim/train/data.hpp"
#include "rpsim/train/model.hpp"
#include "rpsim/train/optimizer.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::sim::train {

struct Config {
  std::string name = "run";
  std::uint64_t seed = 0;
  PrecisionPolicy policy;
  ModelConfig model;
  DataConfig data;
  OptimizerConfig optimizer;
  std::string loss = "cross_entropy";  // or mse_loss
  std::size_t batch_size = 128;        // samples per optimizer step (DeepSpeed's train_batch_size)
  // Micro-batches per optimizer step (DeepSpeed's gradient_accumulation_steps):
  // the step's batch_size samples go through forward and backward in this
  // many micro-batches of batch_size / k, whose gradients are summed into an
  // accumulator before the optimizer step (trainer.cpp).
  int gradient_accumulation_steps = 1;
  // The format of that accumulator, each add rounded to it (nearest even);
  // null: policy.gradients, where PyTorch's `.grad +=` accumulates.
  const Format* grad_accum_format = nullptr;
  int epochs = 1;
  std::int64_t steps = 0;            // > 0: stop after this many steps (epochs ignored)
  double max_grad_norm = 0;          // 0: no clipping
  ResolvedScalerConfig loss_scaler;  // resolved once, by the config layer
  bool shadow = true;
  std::vector<std::int64_t> histogram_steps{0};
  // An inf placed in the first gradient at these steps (of the first micro-batch).
  std::vector<std::int64_t> inject_overflow_steps;
  std::size_t eval_batch_size = 1000;
  bool evaluate = true;
  // > 0: also evaluate before the first step and after every eval_every
  // steps (validation loss curves); 0: after each epoch (or the last step).
  std::int64_t eval_every = 0;
  nlohmann::json source;  // the configuration as read (after --set)
};

// The bytes a run of `config` holds at its peak, from the model table's
// size column and the data's shape (`shape`: a set of the data's kind; its
// samples are not read).
double memory_need_bytes(const Config& config, const Dataset& shape);
// The same from the model's sizes (model_size) when the caller has them.
double memory_need_bytes(const Config& config, const ModelSize& size);

// Throws ConfigError when the run cannot start: a batch larger than the
// training set (`train_samples`) or a need above this machine's memory.
void check_run_fits(const Config& config, std::size_t train_samples, double memory_bytes);

}  // namespace rpsim::sim::train
