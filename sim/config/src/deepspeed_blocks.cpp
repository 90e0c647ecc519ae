// DeepSpeed's fp16, bf16, optimizer and scheduler blocks, read as its
// documentation (docs/config-json) and its runtime define them, each field
// translated into rpsim's vocabulary with a note (deepspeed_blocks.hpp).
#include "deepspeed_blocks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>

#include "rpsim/config/config.hpp"
#include "rpsim/config/config_keys.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/lr_schedule.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
namespace {

using namespace config_json;
using nlohmann::json;

const Fp16Field kFp16Scaler[] = {
    {"initial_scale_power", "init_scale"}, {"loss_scale_window", "growth_interval"},
    {"hysteresis", "hysteresis"},          {"consecutive_hysteresis", "consecutive_hysteresis"},
    {"min_loss_scale", "min_scale"},       {"raise_error_at_min_scale", "raise_at_min_scale"},
};
// Fields ignored at the value that changes nothing in one process, refused at another.
const UnsimulatedField kFp16Ignored[] = {
    {"auto_cast", {}, ""},
    {"fp16_master_weights_and_grads", false, "fp16 master weights and gradients (ZeRO-Offload's mode)"}};
const UnsimulatedField kBf16Ignored[] = {
    {"immediate_grad_update", {}, ""},
    {"check_grad_overflow", false, "bf16 steps skipped on an inf/NaN gradient (rpsim's bf16 never skips)"}};
// FusedAdam / torch.optim parameters that rpsim's optimizers take under the same names.
const char* const kOptimizerParams[] = {"lr", "weight_decay", "eps", "momentum", "betas", "nesterov"};
const UnsimulatedField kOptimizerIgnored[] = {{"torch_adam", {}, ""},
                                              {"bias_correction", true, "Adam without bias correction"},
                                              {"amsgrad", false, "AMSGrad"}};
// Top-level blocks that would change the arithmetic when enabled.
const UnsimulatedField kEnabledIgnored[] = {
    {"amp", false, "Apex AMP is not translated; give \"fp16\": {\"enabled\": true} (DeepSpeed's own fp16)"},
    {"torch_autocast", false, "torch.autocast is not translated; give \"fp16\" or \"bf16\" enabled"}};

const RefusedFields kRefused[] = {{"fp16", kFp16Ignored},
                                  {"bf16", kBf16Ignored},
                                  {"optimizer.params", kOptimizerIgnored},
                                  {"", kEnabledIgnored}};

bool is_optimizer_param(const std::string& s) {
  return std::find(std::begin(kOptimizerParams), std::end(kOptimizerParams), s) != std::end(kOptimizerParams);
}

// fp16 fields go to the loss scaler as the scaling table types them.
json scaler_value(const json& v, const std::string& path, const char* field) {
  for (const auto& f : scaler_fields())
    if (std::string(f.name) == field)
      return f.kind == ScalerFieldKind::flag      ? json(boolean(v, path))
             : f.kind == ScalerFieldKind::integer ? json(integer(v, path))
                                                  : json(number(v, path));
  throw std::logic_error(std::string("no loss-scaler field ") + field);
}

}  // namespace

void read_fp16(const json& v, const std::string& path, DeepSpeed& d) {
  std::vector<std::string> known{"enabled", "loss_scale"};
  for (const auto& f : kFp16Scaler) known.emplace_back(f.deepspeed);
  for (const auto& k : kFp16Ignored) known.emplace_back(k.name);
  if (!check_object_keys(v, known, path, d.report)) return;
  if (!(v.contains("enabled") && boolean(v["enabled"], join(path, "enabled")))) {
    d.t.ignored.push_back(path + " (enabled is false)");
    return;
  }
  d.t.config["policy"] = "fp16-amp";
  d.t.notes.push_back(path +
                      ".enabled -> policy fp16-amp (fp16 compute, fp32 master weights in the optimizer)");
  const double loss_scale = v.contains("loss_scale") ? number(v["loss_scale"], join(path, "loss_scale")) : 0;
  if (!(loss_scale >= 0) || !std::isfinite(loss_scale))
    fail(join(path, "loss_scale"), "must be >= 0 (0 = dynamic)");
  json s = {{"policy", loss_scale > 0 ? "static" : "deepspeed"}};
  if (loss_scale > 0) {
    s["init_scale"] = loss_scale;
    d.t.notes.push_back(
        fmt::format("{}.loss_scale {} -> loss_scaler static, init_scale {}", path, loss_scale, loss_scale));
  } else {
    d.t.notes.push_back(path + ".loss_scale 0 -> loss_scaler deepspeed (DynamicLossScaler)");
  }
  for (const auto& f : kFp16Scaler) {
    if (!v.contains(f.deepspeed)) continue;
    const std::string key = join(path, f.deepspeed);
    if (loss_scale > 0) {
      d.t.ignored.push_back(key + " (a static loss_scale is set)");
      continue;
    }
    json value = scaler_value(v[f.deepspeed], key, f.scaler);
    if (std::string(f.deepspeed) == "initial_scale_power") {
      // DeepSpeed starts at 2**power: past a double's range the int cast wrapped (2^32 + 16 gave 65536).
      const std::int64_t p = value.get<std::int64_t>();
      if (p < -1074 || p > 1023)
        fail(key, fmt::format("2^{} is no finite loss scale (give -1074 to 1023)", p));
      value = std::ldexp(1.0, int(p));
    }
    s[f.scaler] = value;
    d.t.notes.push_back(
        fmt::format("{} {} -> loss_scaler.{} {}", key, v[f.deepspeed].dump(), f.scaler,
                    value.is_number_float() ? fmt::format("{}", value.get<double>()) : value.dump()));
  }
  ignore_unsimulated(v, path, kFp16Ignored, d.t);
  d.t.config["loss_scaler"] = s;
}

void read_bf16(const json& v, const std::string& path, DeepSpeed& d) {
  std::vector<std::string> known{"enabled"};
  for (const auto& k : kBf16Ignored) known.emplace_back(k.name);
  if (!check_object_keys(v, known, path, d.report)) return;
  if (!(v.contains("enabled") && boolean(v["enabled"], join(path, "enabled")))) {
    d.t.ignored.push_back(path + " (enabled is false)");
    return;
  }
  ignore_unsimulated(v, path, kBf16Ignored, d.t);
  if (d.t.config.contains("policy"))
    fail(path, d.t.config["policy"] == "bf16-amp"
                   ? "bf16 and bfloat16 (the same block under its two names) are both enabled: give one"
                   : "fp16 and bf16 are both enabled (DeepSpeed allows one)");
  d.t.config["policy"] = "bf16-amp";
  d.t.notes.push_back(path + ".enabled -> policy bf16-amp (bf16 compute, fp32 master weights)");
}

void read_optimizer(const json& v, const std::string& path, DeepSpeed& d) {
  if (!check_object_keys(v, {"type", "params"}, path, d.report)) return;
  if (!v.contains("type")) fail(path, "expected {\"type\": ..., \"params\": {...}}");
  const std::string given = string(v["type"], join(path, "type"));
  std::string type = given;
  for (char& ch : type) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  const json params = v.value("params", json::object());
  const std::string ppath = join(path, "params");
  std::vector<std::string> known(std::begin(kOptimizerParams), std::end(kOptimizerParams));
  known.emplace_back("adam_w_mode");
  for (const auto& k : kOptimizerIgnored) known.emplace_back(k.name);
  if (!check_object_keys(params, known, ppath, d.report)) return;
  json o;
  if (type == "adam" || type == "adamw" || type == "fusedadam") {
    // DeepSpeed's Adam is FusedAdam with adam_w_mode=True unless told otherwise.
    const bool adamw = type == "adamw" || !params.contains("adam_w_mode") ||
                       boolean(params["adam_w_mode"], ppath + ".adam_w_mode");
    o["type"] = adamw ? "adamw" : "adam";
  } else if (type == "sgd") {
    o["type"] = "sgd";
  } else {
    fail(join(path, "type"), "\"" + given + "\" is not simulated (Adam, AdamW, SGD)");
  }
  d.t.notes.push_back(
      fmt::format("{}.type {} -> optimizer.type {}", path, given, o["type"].get<std::string>()));
  for (const auto& [k, value] : params.items())
    if (is_optimizer_param(k)) {
      o[k] = value;
      d.t.notes.push_back(fmt::format("{}.{} -> optimizer.{}", ppath, k, k));
    }
  ignore_unsimulated(params, ppath, kOptimizerIgnored, d.t);
  d.t.config["optimizer"] = o;
}

// A learning-rate schedule changes the experiment: a run at a constant rate
// is another run. DeepSpeed's WarmupLR and WarmupDecayLR become
// optimizer.schedule, DeepSpeed's own step-by-step rates (lr_schedule.hpp);
// the others (WarmupCosineLR, OneCycle, LRRangeTest) are refused rather
// than approximated by rpsim's linear warmup and cosine decay.
void read_scheduler(const json& s, DeepSpeed& d) {
  const std::string type = s.is_object() && s.contains("type") && s["type"].is_string()
                               ? s["type"].get<std::string>()
                               : std::string("(no type)");
  bool known = false;
  for (const auto& row : deepspeed_schedules()) known = known || type == row.name;
  if (!known)
    fail("scheduler",
         "DeepSpeed's " + type +
             " learning-rate schedule is not simulated (simulated: " + deepspeed_schedule_names() +
             "); remove \"scheduler\" (the run then trains at optimizer.params.lr) or give rpsim's "
             "optimizer.warmup_steps / decay_steps / min_lr");
  json schedule = s.contains("params") ? s["params"] : json::object();
  expect_object(schedule, "scheduler.params");
  schedule["type"] = type;
  (void)read_deepspeed_schedule(schedule, "scheduler.params");  // its errors name the DeepSpeed keys
  if (!d.t.config.contains("optimizer")) d.t.config["optimizer"] = json::object();
  d.t.config["optimizer"]["schedule"] = schedule;
  d.t.notes.push_back("scheduler " + type +
                      " -> optimizer.schedule (DeepSpeed's rate at every step; it advances only on steps not "
                      "skipped for an overflow, as DeepSpeed's engine steps it)");
}

std::span<const Fp16Field> fp16_scaler_fields() {
  return kFp16Scaler;
}

std::span<const char* const> optimizer_params() {
  return kOptimizerParams;
}

std::span<const RefusedFields> deepspeed_refused() {
  return kRefused;
}

std::span<const UnsimulatedField> deepspeed_enabled_refused() {
  return kEnabledIgnored;
}

}  // namespace rpsim::sim::config
