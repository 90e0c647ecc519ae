// SGD (momentum, weight decay) and Adam/AdamW as torch.optim writes them,
// with every intermediate rounded to the policy's optimizer arithmetic
// format, state stored in its optimizer-state format and the new weights
// rounded to the parameter storage format (nearest or stochastic; with a
// Kahan compensation buffer for bf16-kahan, Zamirai et al. 2020).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "rpsim/train/layers.hpp"
#include "rpsim/train/lr_schedule.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::sim::train {

struct OptimizerConfig {
  std::string type = "sgd";  // sgd, adam, adamw
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  // Learning-rate schedule (nanoGPT's get_lr): linear warmup over
  // warmup_steps, then cosine decay to min_lr at decay_steps, min_lr after.
  // Both 0: the constant lr.
  std::int64_t warmup_steps = 0, decay_steps = 0;
  double min_lr = 0;
  // A DeepSpeed scheduler translated from a DeepSpeed config
  // (optimizer.schedule); when set it gives every rate, lr and the schedule
  // above unused.
  DeepSpeedSchedule deepspeed{};
  // The learning rate of step `step` (counted from 0, skipped steps included,
  // as a scheduler stepped every iteration).
  double lr_at(std::int64_t step) const;
  // The same after `applied` steps that were not skipped: a DeepSpeed
  // scheduler counts only those (lr_schedule.hpp).
  double lr_at(std::int64_t step, std::int64_t applied) const;
};

class Optimizer {
 public:
  Optimizer(OptimizerConfig config, const PrecisionPolicy& policy, std::uint64_t seed);
  // One update of every parameter from its (unscaled, clipped) gradient.
  void step(const std::vector<Parameter*>& params);
  // The learning rate of the next step (binary64; rounded to the optimizer's
  // arithmetic format inside step()).
  void set_lr(double lr) { lr_ = lr; }
  // The policy whose formats the updates round to (a copy of the optimizer
  // with its state, re-pointed at a copy of its policy).
  void set_policy(const PrecisionPolicy& policy) { policy_ = &policy; }
  // Buffers per parameter (momentum: 1, Adam: 2) plus Kahan compensation.
  int state_buffers_per_parameter() const;
  const OptimizerConfig& config() const { return config_; }

 private:
  struct State {
    Matrix m, v, compensation;
    bool started = false;
  };
  struct Scalars;  // one step's scalars, each in the arithmetic format
  // The new weights of one parameter before the storage rounding: tensor
  // operation by tensor operation (any formats, Kahan: after that rounding),
  // or element by element where every rounding is inline (the same bits).
  Matrix array_next(Parameter& prm, State& s, const Scalars& k) const;
  Matrix fused_next(Parameter& prm, State& s, const Scalars& k) const;
  OptimizerConfig config_;
  const PrecisionPolicy* policy_;
  std::uint64_t seed_;
  double lr_;
  std::uint64_t steps_ = 0;
  std::vector<State> state_;
};

// L2 norm of all gradients (sum of squares in binary32, in parameter order),
// and the factor torch.nn.utils.clip_grad_norm_ applies: max_norm / (norm +
// 1e-6), capped at 1. Gradients are multiplied (and rounded to the gradient
// format) when the factor is below 1. Returns the norm before clipping.
double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm, const PrecisionPolicy& policy);

}  // namespace rpsim::sim::train
