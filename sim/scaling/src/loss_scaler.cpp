// Policy table, defaults and validation shared by every loss scaler, plus the
// two trivial policies (no scaling, constant scale).
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "loss_scaler_policies.hpp"
#include "rpsim/scaling/loss_scaler.hpp"

namespace rpsim::sim {

namespace {

// Which ScalerConfig fields a policy reads. A field outside this set must be
// left unset: upstream has no such knob (DeepSpeed's scale_factor is fixed at
// 2.0 in DynamicLossScaler.__init__, Apex amp's scale_factor argument is never
// read by LossScaler.update_scale, Keras 3 doubles and halves by literal 2.0).
struct PolicyFields {
  const char* name;
  bool init_scale, growth_factor, backoff_factor, growth_interval, hysteresis, consecutive_hysteresis,
      min_scale, max_scale, raise_at_min_scale;
};

constexpr PolicyFields kPolicies[] = {
    // name        init  grow  back  intv  hyst  consec min   max   raise
    {"none", false, false, false, false, false, false, false, false, false},
    {"static", true, false, false, false, false, false, false, false, false},
    {"pytorch", true, true, true, true, false, false, false, false, false},
    {"deepspeed", true, false, false, true, true, true, true, false, true},
    {"megatron", true, true, true, true, true, false, true, false, false},
    {"apex", true, false, false, true, false, false, true, true, false},
    {"keras", true, false, false, true, false, false, false, false, false},
    {"tf2", true, true, false, true, false, false, false, false, false},
};

const PolicyFields& lookup(const std::string& policy) {
  for (const auto& p : kPolicies)
    if (policy == p.name) return p;
  std::string known;
  for (const auto& p : kPolicies) known += (known.empty() ? "" : ", ") + std::string(p.name);
  throw std::invalid_argument(fmt::format("unknown loss scaler policy '{}' (known: {})", policy, known));
}

[[noreturn]] void bad(const std::string& policy, const char* field, const std::string& what) {
  throw std::invalid_argument(fmt::format("loss scaler '{}': {} {}", policy, field, what));
}

void reject_unused(const ScalerConfig& c, const PolicyFields& p) {
  auto unused = [&](bool set, bool used, const char* field) {
    if (set && !used) bad(c.policy, field, "is not a parameter of this policy");
  };
  unused(c.init_scale.has_value(), p.init_scale, "init_scale");
  unused(c.growth_factor.has_value(), p.growth_factor, "growth_factor");
  unused(c.backoff_factor.has_value(), p.backoff_factor, "backoff_factor");
  unused(c.growth_interval.has_value(), p.growth_interval, "growth_interval");
  unused(c.hysteresis.has_value(), p.hysteresis, "hysteresis");
  unused(c.consecutive_hysteresis, p.consecutive_hysteresis, "consecutive_hysteresis");
  unused(c.min_scale.has_value(), p.min_scale, "min_scale");
  unused(c.max_scale.has_value(), p.max_scale, "max_scale");
  unused(c.raise_at_min_scale, p.raise_at_min_scale, "raise_at_min_scale");
}

// Upstream defaults, cited per policy.
void fill_defaults(ScalerConfig& c) {
  auto set = [](auto& field, auto value) {
    if (!field) field = value;
  };
  if (c.policy == "pytorch") {
    // torch/amp/grad_scaler.py GradScaler.__init__.
    set(c.init_scale, 65536.0);
    set(c.growth_factor, 2.0);
    set(c.backoff_factor, 0.5);
    set(c.growth_interval, std::int64_t{2000});
  } else if (c.policy == "deepspeed") {
    // deepspeed/runtime/constants.py FP16_INITIAL_SCALE_POWER_DEFAULT = 16,
    // FP16_LOSS_SCALE_WINDOW_DEFAULT = 1000, FP16_HYSTERESIS_DEFAULT = 2,
    // FP16_MIN_LOSS_SCALE_DEFAULT = 1 (the "fp16" config section).
    set(c.init_scale, 65536.0);
    set(c.growth_interval, std::int64_t{1000});
    set(c.hysteresis, std::int64_t{2});
    set(c.min_scale, 1.0);
  } else if (c.policy == "megatron") {
    // megatron/training/arguments.py: --initial-loss-scale 2**32,
    // --min-loss-scale 1.0, --loss-scale-window 1000, --hysteresis 2;
    // megatron/core/optimizer/__init__.py passes growth_factor=2.0, backoff_factor=0.5.
    set(c.init_scale, 4294967296.0);
    set(c.growth_factor, 2.0);
    set(c.backoff_factor, 0.5);
    set(c.growth_interval, std::int64_t{1000});
    set(c.hysteresis, std::int64_t{2});
    set(c.min_scale, 1.0);
  } else if (c.policy == "apex") {
    // apex/amp/scaler.py LossScaler.__init__: init_scale=2.**16,
    // scale_window=2000, min_loss_scale=None, max_loss_scale=2.**24.
    set(c.init_scale, 65536.0);
    set(c.growth_interval, std::int64_t{2000});
    set(c.max_scale, 16777216.0);
  } else if (c.policy == "keras") {
    // keras/src/optimizers/loss_scale_optimizer.py: initial_scale=2.0**15,
    // dynamic_growth_steps=2000.
    set(c.init_scale, 32768.0);
    set(c.growth_interval, std::int64_t{2000});
  } else if (c.policy == "tf2") {
    // tensorflow/python/keras/mixed_precision/loss_scale_optimizer.py:
    // _DEFAULT_INITIAL_SCALE = 2**15, _DEFAULT_GROWTH_STEPS = 2000, multiplier 2.
    set(c.init_scale, 32768.0);
    set(c.growth_interval, std::int64_t{2000});
    set(c.growth_factor, 2.0);
  }
}

void validate(const ScalerConfig& c) {
  const auto& P = c.policy;
  auto positive_finite = [&](const std::optional<double>& v, const char* field) {
    if (v && !(std::isfinite(*v) && *v > 0))
      bad(P, field, fmt::format("must be positive and finite, got {}", *v));
  };
  positive_finite(c.init_scale, "init_scale");
  positive_finite(c.min_scale, "min_scale");
  positive_finite(c.max_scale, "max_scale");
  // GradScaler.__init__ asserts growth_factor > 1.0 and backoff_factor < 1.0;
  // Megatron's DynamicGradScaler also asserts backoff_factor > 0.0.
  if (c.growth_factor && !(std::isfinite(*c.growth_factor) && *c.growth_factor > 1.0))
    bad(P, "growth_factor", fmt::format("must be finite and > 1, got {}", *c.growth_factor));
  if (c.backoff_factor && !(*c.backoff_factor > 0.0 && *c.backoff_factor < 1.0))
    bad(P, "backoff_factor", fmt::format("must lie in (0, 1), got {}", *c.backoff_factor));
  if (c.growth_interval && *c.growth_interval < 1)
    bad(P, "growth_interval", fmt::format("must be at least 1, got {}", *c.growth_interval));
  if (c.hysteresis && *c.hysteresis < 1)
    bad(P, "hysteresis", fmt::format("must be at least 1, got {}", *c.hysteresis));
  // Megatron asserts min_scale <= initial_scale; a floor above the start (or a
  // ceiling below it) is a configuration mistake under every policy.
  if (c.min_scale && c.init_scale && *c.min_scale > *c.init_scale)
    bad(P, "min_scale", fmt::format("({}) exceeds init_scale ({})", *c.min_scale, *c.init_scale));
  if (c.max_scale && c.init_scale && *c.max_scale < *c.init_scale)
    bad(P, "max_scale", fmt::format("({}) is below init_scale ({})", *c.max_scale, *c.init_scale));
  if (P == "static" && !c.init_scale)
    bad(P, "init_scale", "is required (the constant loss scale has no default)");
}

// policy "none": no loss scaling (PyTorch GradScaler(enabled=False): scale()
// returns the loss unchanged and step() calls optimizer.step() even when the
// gradients hold inf/NaN, so nothing is ever skipped).
class NoScaling final : public LossScaler {
 public:
  std::string_view policy() const override { return "none"; }
  double scale() const override { return 1.0; }
  bool update(bool) override { return false; }
  std::string state() const override { return "disabled"; }
  std::unique_ptr<LossScaler> clone() const override { return std::make_unique<NoScaling>(*this); }
};

// policy "static": a constant scale, Megatron's ConstantGradScaler
// (megatron/core/optimizer/grad_scaler.py: update() does nothing) under
// MixedPrecisionOptimizer.step, which still skips a step whose gradients hold
// inf/NaN. (Apex amp with a numeric loss_scale differs: LossScaler.update_scale
// returns should_skip=False when not dynamic, so Apex applies such a step.)
class StaticScaler final : public LossScaler {
 public:
  explicit StaticScaler(double scale) : scale_(scale) {}
  std::string_view policy() const override { return "static"; }
  double scale() const override { return scale_; }
  bool update(bool found_nonfinite) override { return found_nonfinite; }
  std::string state() const override { return fmt::format("scale={}", scale_); }
  std::unique_ptr<LossScaler> clone() const override { return std::make_unique<StaticScaler>(*this); }

 private:
  double scale_;
};

}  // namespace

namespace detail {
std::unique_ptr<LossScaler> make_no_scaling() {
  return std::make_unique<NoScaling>();
}
std::unique_ptr<LossScaler> make_static_scaler(const ScalerConfig& c) {
  return std::make_unique<StaticScaler>(*c.init_scale);
}
}  // namespace detail

std::vector<std::string> loss_scaler_policies() {
  std::vector<std::string> names;
  for (const auto& p : kPolicies) names.emplace_back(p.name);
  return names;
}

ScalerConfig resolve_scaler_config(const ScalerConfig& config) {
  const PolicyFields& fields = lookup(config.policy);
  reject_unused(config, fields);
  ScalerConfig c = config;
  fill_defaults(c);
  validate(c);
  return c;
}

std::unique_ptr<LossScaler> make_loss_scaler(const ScalerConfig& config) {
  const ScalerConfig c = resolve_scaler_config(config);
  if (c.policy == "none") return detail::make_no_scaling();
  if (c.policy == "static") return detail::make_static_scaler(c);
  if (c.policy == "pytorch") return detail::make_pytorch_scaler(c);
  if (c.policy == "deepspeed") return detail::make_deepspeed_scaler(c);
  if (c.policy == "megatron") return detail::make_megatron_scaler(c);
  if (c.policy == "apex") return detail::make_apex_scaler(c);
  if (c.policy == "keras") return detail::make_keras_scaler(c);
  if (c.policy == "tf2") return detail::make_tf2_scaler(c);
  throw std::logic_error("make_loss_scaler: policy table and factory disagree on '" + c.policy + "'");
}

}  // namespace rpsim::sim
