// Internal to the trainer: a network (model, policy, optimizer) and one
// forward and backward pass of it, and its evaluation on the test set.
#pragma once

#include <memory>
#include <vector>

#include "rpsim/train/data.hpp"
#include "rpsim/train/optimizer.hpp"
#include "rpsim/train/run_config.hpp"

namespace rpsim::sim::train {

struct Network {
  Model model;
  const PrecisionPolicy* policy;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<Tensor> activation_grads;  // dY arriving at each layer, last step
  double last_loss = 0;
  // The loss scale each layer's parameter gradients carry, last step: the
  // global scale, times the per-layer factors chosen at and above the layer
  // under adaptive loss scaling.
  std::vector<double> grad_scales;
};

// Forward and backward of one batch; leaves parameter gradients scaled by
// `scale` (and, given `adaptive`, by the per-layer factors: net.grad_scales).
double forward_backward(Network& net, const Matrix& x, const std::vector<int>& labels, double scale,
                        const StepContext& ctx, const AdaptiveLossScaling* adaptive = nullptr);

struct TestScore {
  double loss_nats = 0;         // mean over the output rows
  double accuracy_percent = 0;  // top-1 over the output rows
};
// The model on `test`, in batches of `batch` samples.
TestScore score(Model& model, const PrecisionPolicy& policy, const Dataset& test, std::size_t batch,
                const StepContext& ctx);

}  // namespace rpsim::sim::train
