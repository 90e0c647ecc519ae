// Optimizer updates with every operation rounded to the policy's formats.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "rpsim/train/optimizer.hpp"
#include "rpsim/train/step_ops.hpp"

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

double OptimizerConfig::lr_at(std::int64_t step, std::int64_t applied) const {
  return deepspeed.type.empty() ? lr_at(step) : deepspeed.lr_after(applied);
}

int Optimizer::state_buffers_per_parameter() const {
  int n = 0;
  if (config_.type == "sgd")
    n = config_.momentum != 0 ? 1 : 0;
  else
    n = 2;
  return n + (policy_->kahan ? 1 : 0);
}

namespace {

// Whether ValueRounding rounds to `f` inline (binary64: nothing to do,
// binary32: a cast): then one branch-free pass per element, each rounding an
// expression, replaces a pass over the tensor per operation.
bool inline_rounding(const Format& f) {
  return f == formats::binary32() || f == formats::binary64();
}

struct ToBinary64 {
  double operator()(double x) const { return x; }
};
struct ToBinary32 {  // round to nearest even, overflow to infinity: the cast
  double operator()(double x) const { return double(float(x)); }
};

struct FusedTensors {
  const double *value, *grad;
  double *m, *v, *next;
  Eigen::Index n;
  bool sgd, adamw, decay, started;
};

// array_next's operations in the same order on each element, so the same
// bits: rc rounds to the arithmetic format, rst to the state format. The
// scalars and flags are copied into locals and the arrays are __restrict:
// read through `cfg` and `k` inside the loop, a store to m[i] might have
// changed them (all doubles), so GCC reloaded them per element and kept
// every branch in the loop. SGD's loop is instantiated per momentum case
// (the store to m[i] is the one branch if-conversion cannot remove), so it
// vectorises; it was about 6% of the MLP step's CPU time.
template <class RC, class RST, bool kMomentum, bool kStarted, class K>
void sgd_loop(const OptimizerConfig& cfg, const K& k, const FusedTensors& t) {
  const RC rc;
  const RST rst;
  const double* __restrict value = t.value;
  const double* __restrict grad = t.grad;
  double* __restrict m = t.m;
  double* __restrict next = t.next;
  const bool decay = t.decay, nesterov = cfg.nesterov;
  const double wd = k.wd, mu = k.momentum, lr = k.lr;
  for (Eigen::Index i = 0; i < t.n; ++i) {
    const double w = rc(value[i]);
    double g = rc(grad[i]);
    if (decay) g = rc(g + rc(wd * w));
    if constexpr (kMomentum) {
      m[i] = kStarted ? rst(rc(rc(mu * rc(m[i])) + g)) : rst(g);
      const double buf = rc(m[i]);
      g = nesterov ? rc(g + rc(mu * buf)) : buf;
    }
    next[i] = rc(w - rc(lr * g));
  }
}

template <class RC, class RST, class K>
void adam_loop(const K& k, const FusedTensors& t) {
  const RC rc;
  const RST rst;
  const double* __restrict value = t.value;
  const double* __restrict grad = t.grad;
  double* __restrict m = t.m;
  double* __restrict v = t.v;
  double* __restrict next = t.next;
  const bool decay = t.decay, adamw = t.adamw;
  const double wd = k.wd, decay_factor = k.decay_factor, b1 = k.b1, b2 = k.b2;
  const double one_minus_b1 = k.one_minus_b1, one_minus_b2 = k.one_minus_b2;
  const double sqrt_bc2 = k.sqrt_bc2, eps = k.eps, step_size = k.step_size;
  for (Eigen::Index i = 0; i < t.n; ++i) {
    const double w = rc(value[i]);
    double g = rc(grad[i]), w_base = w;
    if (decay && adamw)
      w_base = rc(w * decay_factor);
    else if (decay)
      g = rc(g + rc(wd * w));
    m[i] = rst(rc(rc(b1 * rc(m[i])) + rc(one_minus_b1 * g)));
    v[i] = rst(rc(rc(b2 * rc(v[i])) + rc(one_minus_b2 * rc(g * g))));
    const double denom = rc(rc(rc(std::sqrt(rc(v[i]))) / sqrt_bc2) + eps);
    next[i] = rc(w_base - rc(rc(rc(m[i]) / denom) * step_size));
  }
}

template <class RC, class RST, class K>
void fused_loop(const OptimizerConfig& cfg, const K& k, const FusedTensors& t) {
  if (!t.sgd) return adam_loop<RC, RST>(k, t);
  if (cfg.momentum == 0) return sgd_loop<RC, RST, false, false>(cfg, k, t);
  if (t.started) return sgd_loop<RC, RST, true, true>(cfg, k, t);
  sgd_loop<RC, RST, true, false>(cfg, k, t);
}

}  // namespace

namespace {

// Entries with a nonzero gradient whose weight did not change (step_ops'
// count, which rpsim.torch's Trainer calls too).
std::int64_t stalled_entries(const Matrix& grad, const Matrix& next, const Matrix& value) {
  const auto span = [](const Matrix& m) { return std::span<const double>(m.data(), std::size_t(m.size())); };
  return count_stalled(span(grad), span(next), span(value));
}

}  // namespace

struct Optimizer::Scalars {
  double lr, wd, momentum, b1, b2, one_minus_b1, one_minus_b2, step_size, sqrt_bc2, eps, decay_factor;
};

Matrix Optimizer::fused_next(Parameter& prm, State& s, const Scalars& k) const {
  const bool sgd = config_.type == "sgd";
  const Eigen::Index rows = prm.value.rows(), cols = prm.value.cols();
  if (!s.started && (!sgd || config_.momentum != 0)) s.m = Matrix::Zero(rows, cols);
  if (!s.started && !sgd) s.v = Matrix::Zero(rows, cols);
  Matrix next(rows, cols);
  const FusedTensors t{prm.value.data(),
                       prm.grad.data(),
                       s.m.data(),
                       s.v.data(),
                       next.data(),
                       prm.value.size(),
                       sgd,
                       config_.type == "adamw",
                       config_.weight_decay != 0 && prm.decay,
                       s.started};
  const bool c64 = *policy_->optimizer_compute == formats::binary64();
  const bool st64 = *policy_->optimizer_state == formats::binary64();
  if (c64 && st64) fused_loop<ToBinary64, ToBinary64>(config_, k, t);
  if (c64 && !st64) fused_loop<ToBinary64, ToBinary32>(config_, k, t);
  if (!c64 && st64) fused_loop<ToBinary32, ToBinary64>(config_, k, t);
  if (!c64 && !st64) fused_loop<ToBinary32, ToBinary32>(config_, k, t);
  return next;
}

void Optimizer::step(const std::vector<Parameter*>& params) {
  const PrecisionPolicy& p = *policy_;
  const Format& c = *p.optimizer_compute;
  ++steps_;
  if (state_.size() != params.size()) state_.assign(params.size(), State{});
  Scalars k{};
  k.lr = round_value(c, lr_);
  k.wd = round_value(c, config_.weight_decay);
  k.momentum = round_value(c, config_.momentum);
  if (config_.type != "sgd") {
    k.b1 = round_value(c, config_.betas[0]);
    k.b2 = round_value(c, config_.betas[1]);
    k.one_minus_b1 = round_value(c, 1.0 - k.b1);
    k.one_minus_b2 = round_value(c, 1.0 - k.b2);
    const double t = double(steps_);
    const double bc1 = round_value(c, 1.0 - std::pow(config_.betas[0], t));
    const double bc2 = round_value(c, 1.0 - std::pow(config_.betas[1], t));
    // torch.optim.Adam: step_size = lr / bc1; denom = sqrt(v) / sqrt(bc2) + eps.
    k.step_size = round_value(c, k.lr / bc1);
    k.sqrt_bc2 = round_value(c, std::sqrt(bc2));
    k.eps = round_value(c, config_.eps);
    k.decay_factor = round_value(c, 1.0 - round_value(c, k.lr * k.wd));
  }
  const bool fused = !p.kahan && inline_rounding(c) && inline_rounding(*p.optimizer_state);
  for (std::size_t i = 0; i < params.size(); ++i) {
    Parameter& prm = *params[i];
    if (prm.grad.size() == 0) continue;  // no gradient this step (rpsim.torch: grad None): no update
    State& s = state_[i];
    Matrix next = fused ? fused_next(prm, s, k) : array_next(prm, s, k);
    s.started = true;
    if (!p.kahan)
      round_in_place(p.parameter_storage(), next, p.update_rounding, RandomStream{seed_, (steps_ << 16) ^ i});
    prm.update_stalled = stalled_entries(prm.grad, next, prm.value);
    prm.value = std::move(next);
  }
}

// The update one tensor operation at a time (any formats, Kahan included);
// returns the new weights before the storage rounding (with Kahan: after it).
Matrix Optimizer::array_next(Parameter& prm, State& s, const Scalars& k) const {
  const PrecisionPolicy& p = *policy_;
  const Format& c = *p.optimizer_compute;
  const Format& st = *p.optimizer_state;
  auto R = [&](Matrix m) {
    round_in_place(c, m);
    return m;
  };
  const Matrix w = rounded(c, prm.value);
  Matrix g = rounded(c, prm.grad);
  Matrix update;     // the amount subtracted from w
  Matrix w_decayed;  // AdamW's decoupled decay of w, when it applies
  if (config_.type == "sgd") {
    if (config_.weight_decay != 0 && prm.decay) g = R(g + R(k.wd * w));
    if (config_.momentum != 0) {
      s.m = s.started ? rounded(st, R(R(k.momentum * rounded(c, s.m)) + g)) : rounded(st, g);
      const Matrix buf = rounded(c, s.m);
      g = config_.nesterov ? R(g + R(k.momentum * buf)) : buf;
    }
    update = R(k.lr * g);
  } else {
    if (config_.type == "adamw") {
      if (config_.weight_decay != 0 && prm.decay) w_decayed = R(w * k.decay_factor);
    } else if (config_.weight_decay != 0 && prm.decay) {
      g = R(g + R(k.wd * w));
    }
    if (!s.started) {
      s.m = Matrix::Zero(w.rows(), w.cols());
      s.v = Matrix::Zero(w.rows(), w.cols());
    }
    s.m = rounded(st, R(R(k.b1 * rounded(c, s.m)) + R(k.one_minus_b1 * g)));
    s.v = rounded(st, R(R(k.b2 * rounded(c, s.v)) + R(k.one_minus_b2 * R(g.cwiseProduct(g)))));
    Matrix denom = R(R(R(rounded(c, s.v).cwiseSqrt()) / k.sqrt_bc2).array() + k.eps);
    update = R(R(rounded(c, s.m).cwiseQuotient(denom)) * k.step_size);
  }
  const Matrix& w_base = w_decayed.size() ? w_decayed : w;  // (no copy of w)
  if (!p.kahan) return R(w_base - update);
  // Kahan-compensated update: the part of the update lost when rounding the
  // new weight is carried to the next step.
  if (s.compensation.size() == 0) s.compensation = Matrix::Zero(w.rows(), w.cols());
  const Matrix y = R(R(-update) + rounded(c, s.compensation));
  Matrix next = rounded(p.parameter_storage(), R(w_base + y));
  s.compensation = rounded(st, R(y - R(next - w_base)));
  return next;
}

double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm, const PrecisionPolicy& policy) {
  const Format& c = norm_format(policy);
  std::vector<std::span<const double>> grads;
  for (const Parameter* prm : params) grads.emplace_back(prm->grad.data(), std::size_t(prm->grad.size()));
  const double norm = grad_norm(grads, c);
  if (max_norm > 0) {
    const double coef = clip_coefficient(max_norm, norm, c);
    if (coef < 1.0)
      for (Parameter* prm : params)
        prm->grad_underflow +=
            scale_gradient({prm->grad.data(), std::size_t(prm->grad.size())}, coef, *policy.gradients);
  }
  return norm;
}

}  // namespace rpsim::sim::train
