// A DeepSpeed config file read as DeepSpeed documents it (docs/config-json),
// translated field by field into rpsim's vocabulary. Each block is a table.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "config_values.hpp"
#include "deepspeed_batch.hpp"
#include "rpsim/config/config.hpp"
#include "rpsim/config/config_keys.hpp"
#include "rpsim/config/framework_config.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/lr_schedule.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
namespace {

using namespace config_json;
using nlohmann::json;

// fp16 fields of dynamic loss scaling (DeepSpeed's DynamicLossScaler) and
// the ScalerConfig field each sets; initial_scale_power is a log2.
struct Fp16Field {
  const char* deepspeed;
  const char* scaler;
};
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

// DeepSpeed's documented top-level sections that a single-process numerical
// simulator has nothing to do with (parallelism, I/O, logging, memory).
const char* const kIgnored[] = {"steps_per_print",
                                "wall_clock_breakdown",
                                "dump_state",
                                "zero_optimization",
                                "zero_allow_untested_optimizer",
                                "zero_force_ds_cpu_optimizer",
                                "communication_data_type",
                                "prescale_gradients",
                                "gradient_predivide_factor",
                                "sparse_gradients",
                                "activation_checkpointing",
                                "flops_profiler",
                                "tensorboard",
                                "wandb",
                                "csv_monitor",
                                "comet",
                                "comms_logger",
                                "elasticity",
                                "aio",
                                "checkpoint",
                                "autotuning",
                                "pipeline",
                                "compression_training",
                                "data_efficiency",
                                "curriculum_learning",
                                "memory_breakdown",
                                "disable_allgather",
                                "amp",
                                "timers",
                                "monitor_config",
                                "seq_parallel_communication_data_type",
                                "graph_harvesting",
                                "use_data_before_expert_parallelism",
                                "torch_autocast"};

// rpsim keys that a DeepSpeed field covers; the others pass through a DeepSpeed file.
const char* const kCoveredByDeepSpeed[] = {
    "policy",        "loss_scaler", "batch_size", "gradient_accumulation_steps", "grad_accum_format",
    "max_grad_norm", "optimizer"};

template <class Names>
bool in(const Names& names, const std::string& s) {
  return std::find(std::begin(names), std::end(names), s) != std::end(names);
}

struct DeepSpeed {
  Translation& t;
  KeyReport& report;
  DeepSpeedBatch batch;
};

// fp16 fields go to the loss scaler as the scaling table types them.
json scaler_value(const json& v, const std::string& path, const char* field) {
  for (const auto& f : scaler_fields())
    if (std::string(f.name) == field)
      return f.kind == ScalerFieldKind::flag      ? json(boolean(v, path))
             : f.kind == ScalerFieldKind::integer ? json(integer(v, path))
                                                  : json(number(v, path));
  throw std::logic_error(std::string("no loss-scaler field ") + field);
}

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
    if (in(kOptimizerParams, k)) {
      o[k] = value;
      d.t.notes.push_back(fmt::format("{}.{} -> optimizer.{}", ppath, k, k));
    }
  ignore_unsimulated(params, ppath, kOptimizerIgnored, d.t);
  d.t.config["optimizer"] = o;
}

using Read = void (*)(const json& value, const std::string& path, DeepSpeed& d);
struct DeepSpeedKey {
  const char* name;
  Read read;
};
const DeepSpeedKey kDeepSpeed[] = {
    {"train_batch_size",
     [](const json& v, const std::string& p, DeepSpeed& d) { d.batch.global = batch_field(v, p); }},
    {"train_micro_batch_size_per_gpu",
     [](const json& v, const std::string& p, DeepSpeed& d) { d.batch.micro = batch_field(v, p); }},
    {"gradient_accumulation_steps",
     [](const json& v, const std::string& p, DeepSpeed& d) { d.batch.accumulation = batch_field(v, p); }},
    {"data_types",
     [](const json& v, const std::string& p, DeepSpeed& d) { read_data_types(v, p, d.report, d.batch); }},
    {"gradient_clipping",
     [](const json& v, const std::string& p, DeepSpeed& d) {
       d.t.config["max_grad_norm"] = non_negative(v, p);  // an error names gradient_clipping
       d.t.notes.push_back("gradient_clipping -> max_grad_norm (global norm, after unscaling)");
     }},
    {"fp16", read_fp16},
    {"bf16", read_bf16},
    {"bfloat16", read_bf16},
    {"optimizer", read_optimizer},
    {"scheduler",
     [](const json&, const std::string&, DeepSpeed&) {}},  // read after the optimizer: read_scheduler
};

std::vector<std::string> passthrough_keys() {
  std::vector<std::string> out;
  for (const auto& k : config_keys())
    if (!in(kCoveredByDeepSpeed, k)) out.push_back(k);
  return out;
}

std::vector<std::string> deepspeed_keys() {
  std::vector<std::string> known;
  for (const auto& k : kDeepSpeed) known.emplace_back(k.name);
  for (const char* k : kIgnored) known.emplace_back(k);
  for (const auto& k : passthrough_keys()) known.push_back(k);
  return known;
}

// Hugging Face's Trainer fills "auto" values in from its own arguments; a
// file holding them is not a config yet. All of them named at once (one run
// per key found them one by one).
void refuse_auto(const json& j, const std::string& path, std::vector<std::string>& found) {
  if (j.is_string() && j.get<std::string>() == "auto") found.push_back(path.empty() ? "(top level)" : path);
  if (j.is_object())
    for (const auto& [k, v] : j.items()) refuse_auto(v, join(path, k), found);
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

Translation from_deepspeed(const json& ds, KeyReport& report) {
  std::vector<std::string> autos;
  refuse_auto(ds, "", autos);
  if (!autos.empty())
    throw ConfigError(fmt::format("\"auto\" (filled in by Hugging Face's Trainer) at {}: give the values",
                                  fmt::join(autos, ", ")));
  Translation t;
  t.kind = "deepspeed";
  t.config = json::object();
  DeepSpeed d{t, report, {}};
  check_object_keys(ds, deepspeed_keys(), "", report);
  for (const auto& k : kDeepSpeed)
    if (ds.contains(k.name)) k.read(ds[k.name], k.name, d);
  Translation enabled;  // kIgnored lists these blocks; here only refused when enabled
  ignore_unsimulated(ds, "", kEnabledIgnored, enabled);
  if (ds.contains("scheduler")) read_scheduler(ds["scheduler"], d);
  for (const char* k : kIgnored)
    if (ds.contains(k)) t.ignored.push_back(k);
  for (const auto& k : passthrough_keys())
    if (ds.contains(k)) t.config[k] = ds[k];
  translate_batch(d.batch, ds, t);
  return t;
}

}  // namespace

bool looks_like_deepspeed(const json& j) {
  if (!j.is_object()) return false;
  // Keys both vocabularies have (optimizer, gradient_accumulation_steps) tell nothing.
  const std::vector<std::string> own = config_keys();
  for (const auto& item : j.items()) {
    // A named key, not a structured binding: clang before 16 cannot capture
    // a binding in the lambda below (the fuzz build is clang).
    const std::string& key = item.key();
    if (in(own, key)) continue;
    if (std::any_of(std::begin(kDeepSpeed), std::end(kDeepSpeed),
                    [&](const DeepSpeedKey& k) { return key == k.name; }) ||
        in(kIgnored, key))
      return true;
  }
  return false;
}

Translation translate_framework_config(const json& j, const std::string& vocabulary, KeyReport& report) {
  if (vocabulary == "deepspeed") return from_deepspeed(j, report);
  Translation t;
  t.config = j;
  if (t.config.is_object()) translate_framework_names(t, report);  // else parse_config reports it
  return t;
}

namespace {

// The same field under its two names (DeepSpeed's, rpsim's), from the tables.
std::vector<std::pair<std::string, std::string>> name_pairs() {
  std::vector<std::pair<std::string, std::string>> pairs{{"train_batch_size", "batch_size"},
                                                         {"train_micro_batch_size_per_gpu", "batch_size"},
                                                         {"data_types.grad_accum_dtype", "grad_accum_format"},
                                                         {"gradient_clipping", "max_grad_norm"},
                                                         {"fp16.enabled", "policy"},
                                                         {"bf16.enabled", "policy"},
                                                         {"fp16.loss_scale", "loss_scaler"}};
  for (const auto& f : kFp16Scaler)
    pairs.emplace_back(std::string("fp16.") + f.deepspeed, std::string("loss_scaler.") + f.scaler);
  for (const char* p : kOptimizerParams)
    pairs.emplace_back(std::string("optimizer.params.") + p, std::string("optimizer.") + p);
  return pairs;
}

// A key of one vocabulary under the other's names, or "".
std::string other_names(const std::string& path, bool from_deepspeed) {
  std::string key = path;
  // GradScaler keywords are rpsim's loss_scaler fields under PyTorch's names.
  if (!from_deepspeed && key.rfind("grad_scaler", 0) == 0) key = "loss_scaler" + key.substr(11);
  std::vector<std::string> names;
  for (const auto& [ds, rp] : name_pairs()) {
    const std::string& mine = from_deepspeed ? ds : rp;
    const std::string& theirs = from_deepspeed ? rp : ds;
    // A whole block (fp16) names the top-level keys its fields become.
    std::string name;
    if (mine == key) name = theirs;
    if (mine.rfind(key + ".", 0) == 0) {
      // As deep as the key asked about: fp16 -> loss_scaler, optimizer.params -> optimizer.lr.
      const auto depth = std::count(key.begin(), key.end(), '.');
      std::size_t cut = 0;
      for (long i = 0; i <= depth && cut != std::string::npos; ++i) cut = theirs.find('.', cut ? cut + 1 : 0);
      name = theirs.substr(0, cut);
    }
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  if (names.empty() && from_deepspeed && in(kIgnored, key)) return "nothing (no meaning in a simulator)";
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

}  // namespace

std::string vocabulary_hint(const std::string& path, const std::string& vocabulary) {
  const bool deepspeed = vocabulary == "deepspeed";
  const std::string name = other_names(path, !deepspeed);
  if (name.empty()) return "";
  return deepspeed ? "this is a DeepSpeed config, which calls it " + name
                   : "that is DeepSpeed's name; this config is in rpsim's vocabulary, where it is " + name;
}

}  // namespace rpsim::sim::config
