// What a run needs before it starts: its peak memory and whether it fits.
#include "rpsim/train/run_config.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>

#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::train {

// Every tensor is a binary64 Eigen matrix whatever format its values are
// rounded to (tensor.hpp): 8 bytes per element. Per parameter: the value,
// its gradient, a master copy and up to two optimizer buffers; per sample of
// the larger of the training and evaluation batches, the activations saved
// for backward. The FP64 shadow holds as much again.
double memory_need_bytes(const Config& config, const Dataset& shape) {
  // From the model table's size column: nothing is built, so a model too
  // large for the machine is refused before any allocation.
  return memory_need_bytes(config, model_size(config, shape));
}

double memory_need_bytes(const Config& config, const ModelSize& size) {
  // Backward holds one micro-batch's activations at a time.
  const std::size_t micro = config.batch_size / std::size_t(config.gradient_accumulation_steps);
  const double batch = double(std::max(micro, config.eval_batch_size));
  const double elements = 5 * size.parameters + batch * size.activations_per_sample;
  return 8 * elements * (config.shadow ? 2 : 1);
}

void check_run_fits(const Config& config, std::size_t train_samples, double memory_bytes) {
  if (train_samples > 0 && config.batch_size > train_samples)
    throw ConfigError(fmt::format("batch_size: {} is larger than the training set's {} samples",
                                  config.batch_size, train_samples));
  const double machine = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (memory_bytes > machine)
    throw ConfigError(fmt::format(
        "model ({}) with batch_size {}: the run needs about {:.3g} GB{}, more than this machine's {:.3g} GB",
        config.model.type, config.batch_size, memory_bytes / 1e9,
        config.shadow ? " (half for the FP64 shadow)" : "", machine / 1e9));
}

}  // namespace rpsim::sim::train
