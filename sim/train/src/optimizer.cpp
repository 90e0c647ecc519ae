// Optimizer updates with every operation rounded to the policy's formats.
#include <algorithm>
#include <cmath>

#include "rpsim/train/optimizer.hpp"

namespace rpsim::sim::train {

Optimizer::Optimizer(OptimizerConfig config, const PrecisionPolicy& policy, std::uint64_t seed)
    : config_(std::move(config)), policy_(&policy), seed_(seed), lr_(config_.lr) {}

double OptimizerConfig::lr_at(std::int64_t step) const {
  if (warmup_steps == 0 && decay_steps == 0) return lr;
  if (step < warmup_steps) return lr * double(step + 1) / double(warmup_steps + 1);
  if (step > decay_steps) return min_lr;
  const double ratio =
      double(step - warmup_steps) / double(std::max<std::int64_t>(1, decay_steps - warmup_steps));
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - min_lr);
}

int Optimizer::state_buffers_per_parameter() const {
  int n = 0;
  if (config_.type == "sgd")
    n = config_.momentum != 0 ? 1 : 0;
  else
    n = 2;
  return n + (policy_->kahan ? 1 : 0);
}

void Optimizer::step(const std::vector<Parameter*>& params) {
  const PrecisionPolicy& p = *policy_;
  const Format& c = *p.optimizer_compute;
  const Format& st = *p.optimizer_state;
  const Format& store = p.parameter_storage();
  ++steps_;
  if (state_.size() != params.size()) state_.assign(params.size(), State{});
  auto R = [&](Matrix m) {
    round_in_place(c, m);
    return m;
  };
  const double lr = round_value(c, lr_);
  for (std::size_t k = 0; k < params.size(); ++k) {
    Parameter& prm = *params[k];
    State& s = state_[k];
    const Matrix w = rounded(c, prm.value);
    Matrix g = rounded(c, prm.grad);
    Matrix update;  // the amount subtracted from w
    Matrix w_base = w;
    if (config_.type == "sgd") {
      if (config_.weight_decay != 0 && prm.decay) g = R(g + R(round_value(c, config_.weight_decay) * w));
      if (config_.momentum != 0) {
        if (!s.started) {
          s.m = rounded(st, g);
        } else {
          s.m = rounded(st, R(R(round_value(c, config_.momentum) * rounded(c, s.m)) + g));
        }
        const Matrix buf = rounded(c, s.m);
        g = config_.nesterov ? R(g + R(round_value(c, config_.momentum) * buf)) : buf;
      }
      update = R(lr * g);
    } else {
      const double b1 = round_value(c, config_.betas[0]), b2 = round_value(c, config_.betas[1]);
      if (config_.type == "adamw") {
        if (config_.weight_decay != 0 && prm.decay)
          w_base = R(w * round_value(c, 1.0 - round_value(c, lr * round_value(c, config_.weight_decay))));
      } else if (config_.weight_decay != 0 && prm.decay) {
        g = R(g + R(round_value(c, config_.weight_decay) * w));
      }
      if (!s.started) {
        s.m = Matrix::Zero(w.rows(), w.cols());
        s.v = Matrix::Zero(w.rows(), w.cols());
      }
      s.m = rounded(st, R(R(b1 * rounded(c, s.m)) + R(round_value(c, 1.0 - b1) * g)));
      s.v = rounded(st, R(R(b2 * rounded(c, s.v)) + R(round_value(c, 1.0 - b2) * R(g.cwiseProduct(g)))));
      const double t = double(steps_);
      const double bc1 = round_value(c, 1.0 - std::pow(config_.betas[0], t));
      const double bc2 = round_value(c, 1.0 - std::pow(config_.betas[1], t));
      // torch.optim.Adam: step_size = lr / bc1; denom = sqrt(v) / sqrt(bc2) + eps.
      const double step_size = round_value(c, lr / bc1);
      const double sqrt_bc2 = round_value(c, std::sqrt(bc2));
      Matrix denom = R(R(R(rounded(c, s.v).cwiseSqrt()) / sqrt_bc2).array() + round_value(c, config_.eps));
      update = R(R(rounded(c, s.m).cwiseQuotient(denom)) * step_size);
    }
    s.started = true;
    Matrix next;
    if (p.kahan) {
      // Kahan-compensated update: the part of the update lost when rounding
      // the new weight is carried to the next step.
      if (s.compensation.size() == 0) s.compensation = Matrix::Zero(w.rows(), w.cols());
      const Matrix y = R(R(-update) + rounded(c, s.compensation));
      next = rounded(store, R(w_base + y));
      s.compensation = rounded(st, R(y - R(next - w_base)));
    } else {
      next = R(w_base - update);
      round_in_place(store, next, p.update_rounding, RandomStream{seed_, (steps_ << 16) ^ k});
    }
    prm.value = std::move(next);
  }
}

double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm, const PrecisionPolicy& policy) {
  const Format& c = formats::binary32().bits <= policy.optimizer_compute->bits ? *policy.optimizer_compute
                                                                               : formats::binary32();
  double total = 0;
  for (const Parameter* prm : params) {
    Matrix sq = prm->grad.cwiseProduct(prm->grad);
    round_in_place(c, sq);
    const double s = sequential_sum(c, sq.data(), sq.size());
    total = round_value(c, total + s);
  }
  const double norm = round_value(c, std::sqrt(total));
  if (max_norm > 0) {
    const double coef = round_value(c, max_norm / round_value(c, norm + 1e-6));
    if (coef < 1.0)
      for (Parameter* prm : params) {
        const Matrix before = prm->grad;
        prm->grad *= coef;
        round_in_place(*policy.gradients, prm->grad);
        prm->grad_underflow += count_flushed(before, prm->grad);
      }
  }
  return norm;
}

}  // namespace rpsim::sim::train
