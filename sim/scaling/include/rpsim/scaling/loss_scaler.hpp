// Loss scalers of the frameworks people train with, reproduced step for step.
//
// A training loop uses a scaler like this:
//
//   auto scaler = make_loss_scaler(config);
//   for each step:
//     double s = scaler->scale();           // multiply the loss by s before backward
//     ... backward, gradients /= s, look for inf/NaN ...
//     bool skipped = scaler->update(found_nonfinite);
//     if (!skipped) optimizer step;
//
// Each policy mirrors one upstream implementation (file and function cited on
// the class in src/loss_scaler_<framework>.cpp), including the order of its
// counters and where its off-by-one lies; the table in README.md lists the
// defaults. Unset fields of ScalerConfig take the upstream default of the
// chosen policy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rpsim::sim {

class AdaptiveLossScaling;

// Parameters under the names PyTorch / DeepSpeed users know. Fields a policy
// does not use must be left unset (make_loss_scaler rejects them, naming the
// field, so that a user never believes a setting took effect when it did not).
struct ScalerConfig {
  // none, static, pytorch, deepspeed, megatron, apex, keras, tf2.
  std::string policy = "pytorch";
  // Scale for the first step (PyTorch init_scale, DeepSpeed 2^initial_scale_power,
  // Megatron initial_scale, Keras initial_scale, static: the constant scale).
  std::optional<double> init_scale;
  // Multiplier on growth (PyTorch growth_factor, DeepSpeed scale_factor,
  // Megatron growth_factor, Apex scale_factor, Keras/TF2 multiplier).
  std::optional<double> growth_factor;
  // Multiplier on overflow (PyTorch backoff_factor, Megatron backoff_factor;
  // DeepSpeed/Apex/Keras divide by their scale factor, i.e. 1/growth_factor).
  std::optional<double> backoff_factor;
  // Clean steps before growing (PyTorch growth_interval, DeepSpeed
  // loss_scale_window, Megatron growth_interval, Apex scale_window, Keras
  // dynamic_growth_steps, TF2 increment_period).
  std::optional<std::int64_t> growth_interval;
  // Overflows tolerated before backing off (DeepSpeed delayed_shift, Megatron hysteresis).
  std::optional<std::int64_t> hysteresis;
  // DeepSpeed consecutive_hysteresis: a clean step refills the hysteresis budget.
  bool consecutive_hysteresis = false;
  // Lower clamp (DeepSpeed min_loss_scale, Megatron min_scale, Apex min_loss_scale).
  std::optional<double> min_scale;
  // Upper clamp (Apex max_loss_scale = 2^24).
  std::optional<double> max_scale;
  // DeepSpeed raise_error_at_min_scale (upstream default True; off here so that
  // a simulation runs to the end unless asked).
  bool raise_at_min_scale = false;
};

// Thrown by update() where upstream raises because the scale cannot go lower
// (DeepSpeed DynamicLossScaler with raise_error_at_min_scale).
class LossScaleAtMinimum : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LossScaler {
 public:
  virtual ~LossScaler() = default;
  // Policy name as given to make_loss_scaler.
  virtual std::string_view policy() const = 0;
  // The scale in effect for the next backward pass.
  virtual double scale() const = 0;
  // Reports whether the backward pass just done (at scale()) produced an inf or
  // NaN gradient; returns whether that step's optimizer step is skipped, and
  // moves the scale to the one for the next step.
  virtual bool update(bool found_nonfinite) = 0;
  // Counters as upstream keeps them, for logging ("growth_tracker=3", ...).
  virtual std::string state() const = 0;
  virtual std::unique_ptr<LossScaler> clone() const = 0;
  // Per-layer adaptive loss scaling (Zhao et al.) on top of scale(): the
  // trainer asks it for each layer's factor during backward. nullptr for the
  // scalers that keep one global scale.
  virtual const AdaptiveLossScaling* per_layer() const { return nullptr; }
};

// The loss-scaler table: one row per framework policy, from which the names,
// the fields each policy takes, its upstream defaults, validation and the
// factory are all read. Adding a scaler is a row here (its class in its own
// loss_scaler_<framework>.cpp) plus its tests.
enum ScalerField : unsigned {
  field_init_scale = 1u << 0,
  field_growth_factor = 1u << 1,
  field_backoff_factor = 1u << 2,
  field_growth_interval = 1u << 3,
  field_hysteresis = 1u << 4,
  field_consecutive_hysteresis = 1u << 5,
  field_min_scale = 1u << 6,
  field_max_scale = 1u << 7,
  field_raise_at_min_scale = 1u << 8,
};
struct LossScalerInfo {
  std::string_view name;
  std::string_view upstream;  // the file and function it reproduces
  unsigned fields;            // ScalerField bits: what the policy reads
  ScalerConfig defaults;      // upstream defaults of those fields (cited at the row)
  std::unique_ptr<LossScaler> (*make)(const ScalerConfig& resolved);
  std::string_view alias = {};  // another name configs give it (PyTorch's scaler: "dynamic")
};
std::span<const LossScalerInfo> loss_scalers();
// The row named `name`, or whose alias it is; nullptr for neither.
const LossScalerInfo* find_loss_scaler(std::string_view name);

// ScalerConfig's fields, one row each: the name configs use, its bit, its
// kind (a flag is set by a nonzero value), whether a config sets it, the
// setter a config reader calls (after checking the kind) and the getter.
enum class ScalerFieldKind { real, integer, flag };
struct ScalerFieldInfo {
  const char* name;
  ScalerField bit;
  ScalerFieldKind kind;
  bool (*is_set)(const ScalerConfig&);
  void (*set)(ScalerConfig&, double);
  double (*get)(const ScalerConfig&);  // when is_set (a flag: 0 or 1)
};
std::span<const ScalerFieldInfo> scaler_fields();
// ScalerConfig's field names (as in configs and the CLI), in declaration order.
std::vector<std::string> scaler_field_names();

// The policies make_loss_scaler accepts, in the order the CLI lists them.
std::vector<std::string> loss_scaler_policies();

// A ScalerConfig that resolve_scaler_config has checked and completed with
// its policy's upstream defaults. Only resolve_scaler_config makes one (the
// default is policy "none"), so a config layer resolves a run's scaler once
// and the factory below takes the result without checking it again.
class ResolvedScalerConfig {
 public:
  ResolvedScalerConfig();
  const ScalerConfig& get() const { return config_; }
  const ScalerConfig* operator->() const { return &config_; }

 private:
  explicit ResolvedScalerConfig(ScalerConfig config) : config_(std::move(config)) {}
  friend ResolvedScalerConfig resolve_scaler_config(const ScalerConfig& config);
  ScalerConfig config_;
};

// `config` with every unset field that `config.policy` uses filled with that
// policy's upstream default. Throws std::invalid_argument naming the field for
// an unknown policy, a field the policy does not use, or a bad value
// (non-positive or non-finite scale, growth_factor <= 1, backoff_factor outside
// (0,1), growth_interval < 1, hysteresis < 1, min_scale > init_scale,
// max_scale < init_scale, static without init_scale).
ResolvedScalerConfig resolve_scaler_config(const ScalerConfig& config);

// The scaler of a resolved config (its row's factory; nothing is checked again).
std::unique_ptr<LossScaler> make_loss_scaler(const ResolvedScalerConfig& config);
// resolve_scaler_config, then the scaler: for a caller that has the fields
// only (the CLI's `rpsim scaler`, tests).
std::unique_ptr<LossScaler> make_loss_scaler(const ScalerConfig& config);

}  // namespace rpsim::sim
