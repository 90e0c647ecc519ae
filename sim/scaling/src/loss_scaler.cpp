// Policy table, defaults and validation shared by every loss scaler, plus the
// two trivial policies (no scaling, constant scale).
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "loss_scaler_policies.hpp"
#include "rpsim/scaling/loss_scaler.hpp"

namespace rpsim::sim {

namespace {

// One row per ScalerConfig field: its name, its bit, its kind, whether a
// config sets it, how a config value sets it, and its value once set.
constexpr ScalerFieldInfo kFields[] = {
    {"init_scale", field_init_scale, ScalerFieldKind::real,
     [](const ScalerConfig& c) { return c.init_scale.has_value(); },
     [](ScalerConfig& c, double v) { c.init_scale = v; },
     [](const ScalerConfig& c) { return *c.init_scale; }},
    {"growth_factor", field_growth_factor, ScalerFieldKind::real,
     [](const ScalerConfig& c) { return c.growth_factor.has_value(); },
     [](ScalerConfig& c, double v) { c.growth_factor = v; },
     [](const ScalerConfig& c) { return *c.growth_factor; }},
    {"backoff_factor", field_backoff_factor, ScalerFieldKind::real,
     [](const ScalerConfig& c) { return c.backoff_factor.has_value(); },
     [](ScalerConfig& c, double v) { c.backoff_factor = v; },
     [](const ScalerConfig& c) { return *c.backoff_factor; }},
    {"growth_interval", field_growth_interval, ScalerFieldKind::integer,
     [](const ScalerConfig& c) { return c.growth_interval.has_value(); },
     [](ScalerConfig& c, double v) { c.growth_interval = std::int64_t(v); },
     [](const ScalerConfig& c) { return double(*c.growth_interval); }},
    {"hysteresis", field_hysteresis, ScalerFieldKind::integer,
     [](const ScalerConfig& c) { return c.hysteresis.has_value(); },
     [](ScalerConfig& c, double v) { c.hysteresis = std::int64_t(v); },
     [](const ScalerConfig& c) { return double(*c.hysteresis); }},
    {"consecutive_hysteresis", field_consecutive_hysteresis, ScalerFieldKind::flag,
     [](const ScalerConfig& c) { return c.consecutive_hysteresis; },
     [](ScalerConfig& c, double v) { c.consecutive_hysteresis = v != 0; },
     [](const ScalerConfig& c) { return double(c.consecutive_hysteresis); }},
    {"min_scale", field_min_scale, ScalerFieldKind::real,
     [](const ScalerConfig& c) { return c.min_scale.has_value(); },
     [](ScalerConfig& c, double v) { c.min_scale = v; }, [](const ScalerConfig& c) { return *c.min_scale; }},
    {"max_scale", field_max_scale, ScalerFieldKind::real,
     [](const ScalerConfig& c) { return c.max_scale.has_value(); },
     [](ScalerConfig& c, double v) { c.max_scale = v; }, [](const ScalerConfig& c) { return *c.max_scale; }},
    {"raise_at_min_scale", field_raise_at_min_scale, ScalerFieldKind::flag,
     [](const ScalerConfig& c) { return c.raise_at_min_scale; },
     [](ScalerConfig& c, double v) { c.raise_at_min_scale = v != 0; },
     [](const ScalerConfig& c) { return double(c.raise_at_min_scale); }},
};

ScalerConfig defaults(std::optional<double> init, std::optional<double> growth, std::optional<double> backoff,
                      std::optional<std::int64_t> interval, std::optional<std::int64_t> hysteresis,
                      std::optional<double> min_scale, std::optional<double> max_scale) {
  ScalerConfig c;
  c.init_scale = init;
  c.growth_factor = growth;
  c.backoff_factor = backoff;
  c.growth_interval = interval;
  c.hysteresis = hysteresis;
  c.min_scale = min_scale;
  c.max_scale = max_scale;
  return c;
}

constexpr std::nullopt_t none = std::nullopt;
constexpr unsigned kPyTorch =
    field_init_scale | field_growth_factor | field_backoff_factor | field_growth_interval;
constexpr unsigned kDeepSpeed = field_init_scale | field_growth_interval | field_hysteresis |
                                field_consecutive_hysteresis | field_min_scale | field_raise_at_min_scale;
constexpr unsigned kMegatron = field_init_scale | field_growth_factor | field_backoff_factor |
                               field_growth_interval | field_hysteresis | field_min_scale;
constexpr unsigned kApex = field_init_scale | field_growth_interval | field_min_scale | field_max_scale;

// Which fields a policy reads: a field outside them must be left unset, as
// upstream has no such knob (DeepSpeed's scale_factor is fixed at 2.0 in
// DynamicLossScaler.__init__, Apex amp's scale_factor argument is never read
// by LossScaler.update_scale, Keras 3 doubles and halves by literal 2.0).
const std::vector<LossScalerInfo>& table() {
  static const std::vector<LossScalerInfo> rows{
      {"none", "PyTorch GradScaler(enabled=False)", 0, ScalerConfig{},
       [](const ScalerConfig&) { return detail::make_no_scaling(); }},
      {"static", "megatron/core/optimizer/grad_scaler.py ConstantGradScaler", field_init_scale,
       ScalerConfig{}, detail::make_static_scaler},
      // torch/amp/grad_scaler.py GradScaler.__init__.
      {"pytorch", "torch/amp/grad_scaler.py, torch._amp_update_scale_", kPyTorch,
       defaults(65536.0, 2.0, 0.5, 2000, none, none, none), detail::make_pytorch_scaler, "dynamic"},
      // deepspeed/runtime/constants.py FP16_INITIAL_SCALE_POWER_DEFAULT = 16,
      // FP16_LOSS_SCALE_WINDOW_DEFAULT = 1000, FP16_HYSTERESIS_DEFAULT = 2,
      // FP16_MIN_LOSS_SCALE_DEFAULT = 1 (the "fp16" config section).
      {"deepspeed", "deepspeed/runtime/fp16/loss_scaler.py DynamicLossScaler", kDeepSpeed,
       defaults(65536.0, none, none, 1000, 2, 1.0, none), detail::make_deepspeed_scaler},
      // megatron/training/arguments.py: --initial-loss-scale 2**32,
      // --min-loss-scale 1.0, --loss-scale-window 1000, --hysteresis 2;
      // megatron/core/optimizer/__init__.py passes growth_factor=2.0, backoff_factor=0.5.
      {"megatron", "megatron/core/optimizer/grad_scaler.py DynamicGradScaler", kMegatron,
       defaults(4294967296.0, 2.0, 0.5, 1000, 2, 1.0, none), detail::make_megatron_scaler},
      // apex/amp/scaler.py LossScaler.__init__: init_scale=2.**16,
      // scale_window=2000, min_loss_scale=None, max_loss_scale=2.**24.
      {"apex", "apex/amp/scaler.py LossScaler", kApex,
       defaults(65536.0, none, none, 2000, none, none, 16777216.0), detail::make_apex_scaler},
      // keras/src/optimizers/loss_scale_optimizer.py: initial_scale=2.0**15,
      // dynamic_growth_steps=2000.
      {"keras", "Keras 3 keras/src/optimizers/loss_scale_optimizer.py",
       field_init_scale | field_growth_interval, defaults(32768.0, none, none, 2000, none, none, none),
       detail::make_keras_scaler},
      // tensorflow/python/keras/mixed_precision/loss_scale_optimizer.py:
      // _DEFAULT_INITIAL_SCALE = 2**15, _DEFAULT_GROWTH_STEPS = 2000, multiplier 2.
      {"tf2", "tf.keras 2 _DynamicLossScaleState",
       field_init_scale | field_growth_factor | field_growth_interval,
       defaults(32768.0, 2.0, none, 2000, none, none, none), detail::make_tf2_scaler},
      // Zhao et al., "Adaptive Loss Scaling for Mixed Precision Training"
      // (arXiv 1910.12385): a per-layer factor chosen from each layer's
      // gradient and weight statistics during backward, over a constant global
      // scale (1 unless init_scale is given); an inf/NaN step is skipped.
      {"adaptive", "kumasento/gradient-scaling ada_loss/core.py AdaLoss.loss_scaling (float16 bounds)",
       field_init_scale, defaults(1.0, none, none, none, none, none, none), detail::make_adaptive_scaler},
  };
  return rows;
}

const LossScalerInfo& lookup(const std::string& policy) {
  if (const LossScalerInfo* p = find_loss_scaler(policy)) return *p;
  throw std::invalid_argument(fmt::format("unknown loss scaler policy '{}' (known: {})", policy,
                                          fmt::join(loss_scaler_policies(), ", ")));
}

[[noreturn]] void bad(const std::string& policy, const char* field, const std::string& what) {
  throw std::invalid_argument(fmt::format("loss scaler '{}': {} {}", policy, field, what));
}

void reject_unused(const ScalerConfig& c, const LossScalerInfo& p) {
  for (const auto& f : kFields)
    if (f.is_set(c) && !(p.fields & f.bit)) bad(c.policy, f.name, "is not a parameter of this policy");
}

// Every unset field takes the policy's upstream default.
void fill_defaults(ScalerConfig& c, const ScalerConfig& d) {
  auto fill = [&](auto ScalerConfig::*field) {
    if (!(c.*field)) c.*field = d.*field;
  };
  fill(&ScalerConfig::init_scale);
  fill(&ScalerConfig::growth_factor);
  fill(&ScalerConfig::backoff_factor);
  fill(&ScalerConfig::growth_interval);
  fill(&ScalerConfig::hysteresis);
  fill(&ScalerConfig::min_scale);
  fill(&ScalerConfig::max_scale);
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

std::span<const LossScalerInfo> loss_scalers() {
  return table();
}

std::span<const ScalerFieldInfo> scaler_fields() {
  return kFields;
}

std::vector<std::string> scaler_field_names() {
  std::vector<std::string> names;
  for (const auto& f : kFields) names.emplace_back(f.name);
  return names;
}

const LossScalerInfo* find_loss_scaler(std::string_view name) {
  for (const auto& p : table())
    if (name == p.name || (!p.alias.empty() && name == p.alias)) return &p;
  return nullptr;
}

std::vector<std::string> loss_scaler_policies() {
  std::vector<std::string> names;
  for (const auto& p : table()) names.emplace_back(p.name);
  return names;
}

// "none" takes no field and has no default: resolved as it stands.
ResolvedScalerConfig::ResolvedScalerConfig() {
  config_.policy = "none";
}

ResolvedScalerConfig resolve_scaler_config(const ScalerConfig& config) {
  const LossScalerInfo& info = lookup(config.policy);
  reject_unused(config, info);
  ScalerConfig c = config;
  fill_defaults(c, info.defaults);
  validate(c);
  return ResolvedScalerConfig(std::move(c));
}

std::unique_ptr<LossScaler> make_loss_scaler(const ResolvedScalerConfig& config) {
  return lookup(config->policy).make(config.get());
}

std::unique_ptr<LossScaler> make_loss_scaler(const ScalerConfig& config) {
  return make_loss_scaler(resolve_scaler_config(config));
}

}  // namespace rpsim::sim
