#include <fmt/format.h>

#include <cmath>
#include <set>

#include "rpsim/train/config_error.hpp"
#include "rpsim/train/framework_config.hpp"

namespace rpsim::sim::train {
namespace {

[[noreturn]] void bad(const std::string& where, const std::string& key, const std::string& why) {
  throw ConfigError(fmt::format("{}: {}: {}", where, key, why));
}

double num(const nlohmann::json& v, const std::string& where, const std::string& key) {
  if (!v.is_number()) bad(where, key, "expected a number, got " + v.dump());
  return v.get<double>();
}

std::int64_t integer(const nlohmann::json& v, const std::string& where, const std::string& key) {
  const double d = num(v, where, key);
  if (d != std::floor(d)) bad(where, key, "expected an integer, got " + v.dump());
  return std::int64_t(d);
}

bool flag(const nlohmann::json& v, const std::string& where, const std::string& key) {
  if (!v.is_boolean()) bad(where, key, "expected true or false, got " + v.dump());
  return v.get<bool>();
}

// DeepSpeed's documented top-level sections that a single-process numerical
// simulator has nothing to do with (parallelism, I/O, logging, memory).
const std::set<std::string>& deepspeed_ignored() {
  static const std::set<std::string> s = {"train_micro_batch_size_per_gpu",
                                          "steps_per_print",
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
                                          "data_types",
                                          "autotuning",
                                          "pipeline",
                                          "compression_training",
                                          "data_efficiency",
                                          "curriculum_learning",
                                          "memory_breakdown",
                                          "disable_allgather",
                                          "scheduler",
                                          "amp",
                                          "timers",
                                          "monitor_config",
                                          "seq_parallel_communication_data_type",
                                          "graph_harvesting",
                                          "use_data_before_expert_parallelism",
                                          "torch_autocast"};
  return s;
}

const std::set<std::string>& rpsim_keys() {
  static const std::set<std::string> s = {"name",
                                          "comment",
                                          "seed",
                                          "policy",
                                          "model",
                                          "data",
                                          "optimizer",
                                          "loss",
                                          "batch_size",
                                          "epochs",
                                          "steps",
                                          "max_grad_norm",
                                          "loss_scaler",
                                          "shadow",
                                          "telemetry",
                                          "inject_overflow_steps",
                                          "eval_batch_size",
                                          "evaluate",
                                          "grad_scaler",
                                          "fp8_recipe"};
  return s;
}

Translation from_deepspeed(const nlohmann::json& ds, const std::string& where) {
  Translation t;
  t.kind = "deepspeed";
  nlohmann::json c = {{"name", "deepspeed"},
                      {"comment", "translated from a DeepSpeed config"},
                      {"model", {{"type", "mlp"}, {"hidden", {256, 256}}}},
                      {"data", {{"name", "fashion-mnist"}}},
                      {"epochs", 1},
                      {"policy", "fp32"},
                      {"loss_scaler", {{"policy", "none"}}}};
  std::int64_t micro = 0, accumulation = 1, global = 0;
  for (const auto& [key, value] : ds.items()) {
    if (key == "train_batch_size") {
      global = integer(value, where, key);
    } else if (key == "gradient_accumulation_steps") {
      accumulation = integer(value, where, key);
    } else if (key == "gradient_clipping") {
      c["max_grad_norm"] = num(value, where, key);
    } else if (key == "fp16") {
      for (const auto& [k, v] : value.items())
        if (k != "enabled" && k != "loss_scale" && k != "initial_scale_power" && k != "loss_scale_window" &&
            k != "hysteresis" && k != "consecutive_hysteresis" && k != "min_loss_scale" && k != "auto_cast" &&
            k != "fp16_master_weights_and_grads" && k != "raise_error_at_min_scale")
          bad(where, "fp16." + k, "unknown DeepSpeed fp16 field");
      if (!value.value("enabled", false)) continue;
      c["policy"] = "fp16-amp";
      nlohmann::json s = {{"policy", "deepspeed"}};
      const double loss_scale =
          value.contains("loss_scale") ? num(value["loss_scale"], where, "fp16.loss_scale") : 0;
      if (loss_scale < 0) bad(where, "fp16.loss_scale", "must be >= 0 (0 = dynamic)");
      if (loss_scale > 0) {
        s = {{"policy", "static"}, {"init_scale", loss_scale}};
      } else {
        // DeepSpeed defaults: initial_scale_power 16, window 1000, hysteresis 2, min 1.
        s["init_scale"] =
            std::ldexp(1.0, int(value.contains("initial_scale_power")
                                    ? integer(value["initial_scale_power"], where, "fp16.initial_scale_power")
                                    : 16));
        s["growth_interval"] = value.contains("loss_scale_window")
                                   ? integer(value["loss_scale_window"], where, "fp16.loss_scale_window")
                                   : 1000;
        s["hysteresis"] =
            value.contains("hysteresis") ? integer(value["hysteresis"], where, "fp16.hysteresis") : 2;
        if (value.contains("consecutive_hysteresis"))
          s["consecutive_hysteresis"] =
              flag(value["consecutive_hysteresis"], where, "fp16.consecutive_hysteresis");
        s["min_scale"] = value.contains("min_loss_scale")
                             ? num(value["min_loss_scale"], where, "fp16.min_loss_scale")
                             : 1.0;
        if (value.contains("raise_error_at_min_scale"))
          s["raise_at_min_scale"] =
              flag(value["raise_error_at_min_scale"], where, "fp16.raise_error_at_min_scale");
      }
      c["loss_scaler"] = s;
      if (value.contains("auto_cast")) t.ignored.push_back("fp16.auto_cast");
      if (value.contains("fp16_master_weights_and_grads"))
        t.ignored.push_back("fp16.fp16_master_weights_and_grads");
      t.notes.push_back(
          "fp16.enabled: fp16 compute with fp32 master weights in the optimizer (policy fp16-amp)");
    } else if (key == "bf16" || key == "bfloat16") {
      for (const auto& [k, v] : value.items())
        if (k != "enabled" && k != "immediate_grad_update" && k != "check_grad_overflow")
          bad(where, key + "." + k, "unknown DeepSpeed bf16 field");
      if (value.value("enabled", false)) c["policy"] = "bf16-amp";
    } else if (key == "optimizer") {
      if (!value.is_object() || !value.contains("type"))
        bad(where, "optimizer", "expected {\"type\": ..., \"params\": {...}}");
      std::string type = value["type"].get<std::string>();
      for (char& ch : type) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      nlohmann::json o;
      const nlohmann::json params = value.value("params", nlohmann::json::object());
      if (type == "adam" || type == "adamw" || type == "fusedadam") {
        // DeepSpeed's Adam is FusedAdam with adam_w_mode=True unless told otherwise.
        const bool adamw = type == "adamw" || params.value("adam_w_mode", true);
        o["type"] = adamw ? "adamw" : "adam";
      } else if (type == "sgd") {
        o["type"] = "sgd";
      } else {
        bad(where, "optimizer.type",
            "\"" + value["type"].get<std::string>() + "\" is not simulated (Adam, AdamW, SGD)");
      }
      for (const auto& [k, v] : params.items()) {
        if (k == "lr" || k == "weight_decay" || k == "eps" || k == "momentum" || k == "betas" ||
            k == "nesterov")
          o[k] = v;
        else if (k == "adam_w_mode" || k == "torch_adam" || k == "bias_correction" || k == "amsgrad")
          t.ignored.push_back("optimizer.params." + k);
        else
          bad(where, "optimizer.params." + k, "unknown optimizer parameter");
      }
      c["optimizer"] = o;
    } else if (deepspeed_ignored().count(key)) {
      t.ignored.push_back(key);
    } else {
      bad(where, key, "unknown DeepSpeed field (not in DeepSpeed's config documentation)");
    }
  }
  if (ds.contains("train_micro_batch_size_per_gpu"))
    micro = integer(ds["train_micro_batch_size_per_gpu"], where, "train_micro_batch_size_per_gpu");
  // One simulated device: the global batch is the batch of one optimizer step.
  if (global <= 0 && micro > 0) global = micro * accumulation;
  if (global <= 0) global = 128;
  c["batch_size"] = global;
  if (accumulation > 1)
    t.notes.push_back(fmt::format("gradient_accumulation_steps {}: one optimizer step per batch of {}",
                                  accumulation, global));
  t.config = c;
  return t;
}

}  // namespace

bool looks_like_deepspeed(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  bool deepspeed = false;
  for (const auto& [key, value] : j.items()) {
    // "optimizer" is a key of both; any other rpsim key makes it rpsim's.
    if (key != "optimizer" && rpsim_keys().count(key)) return false;
    if (key == "train_batch_size" || key == "fp16" || key == "bf16" || key == "gradient_accumulation_steps" ||
        key == "train_micro_batch_size_per_gpu" || key == "zero_optimization" || key == "gradient_clipping")
      deepspeed = true;
  }
  return deepspeed;
}

Translation translate_framework_config(const nlohmann::json& j, const std::string& where) {
  if (looks_like_deepspeed(j)) return from_deepspeed(j, where);
  Translation t;
  t.config = j;
  nlohmann::json& c = t.config;
  if (!c.is_object()) return t;  // parse_config reports it
  // Keras mixed-precision policy names.
  if (c.contains("policy") && c["policy"].is_string()) {
    const std::string p = c["policy"];
    if (p == "mixed_float16") {
      c["policy"] = "fp16-amp";
      // Keras wraps the optimizer in a LossScaleOptimizer under mixed_float16.
      if (!c.contains("loss_scaler")) c["loss_scaler"] = {{"policy", "keras"}};
      t.notes.push_back("policy mixed_float16: fp16-amp with the Keras 3 LossScaleOptimizer");
    } else if (p == "mixed_bfloat16") {
      c["policy"] = "bf16-amp";
    } else if (p == "float32") {
      c["policy"] = "fp32";
    }
  }
  // torch.amp.GradScaler(init_scale=..., growth_factor=..., backoff_factor=...,
  // growth_interval=..., enabled=...).
  if (c.contains("grad_scaler")) {
    const nlohmann::json g = c["grad_scaler"];
    c.erase("grad_scaler");
    if (c.contains("loss_scaler"))
      bad(where, "grad_scaler", "give either grad_scaler or loss_scaler, not both");
    if (!g.is_object()) bad(where, "grad_scaler", "expected an object of GradScaler keyword arguments");
    nlohmann::json s = {{"policy", "pytorch"}};
    for (const auto& [k, v] : g.items()) {
      if (k == "enabled") {
        if (!flag(v, where, "grad_scaler.enabled")) s = {{"policy", "none"}};
      } else if (k == "init_scale" || k == "growth_factor" || k == "backoff_factor" ||
                 k == "growth_interval") {
        s[k] = v;
      } else if (k == "device") {
        t.ignored.push_back("grad_scaler.device");
      } else {
        bad(where, "grad_scaler." + k,
            "not a GradScaler keyword (init_scale growth_factor backoff_factor growth_interval enabled)");
      }
    }
    if (s["policy"] == "none") s = {{"policy", "none"}};
    c["loss_scaler"] = s;
  }
  // transformer_engine.common.recipe.DelayedScaling fields.
  if (c.contains("fp8_recipe")) {
    const nlohmann::json r = c["fp8_recipe"];
    c.erase("fp8_recipe");
    if (!r.is_object()) bad(where, "fp8_recipe", "expected an object of DelayedScaling fields");
    nlohmann::json policy = {{"name", "fp8"}};
    nlohmann::json fp8 = {{"scaling", "delayed"}};
    for (const auto& [k, v] : r.items()) {
      if (k == "fp8_format") {
        const std::string f = v.is_string() ? v.get<std::string>() : "";
        if (f == "E4M3") {
          // E4M3 in both passes: the backward inputs are e4m3 too.
          policy["ops"] = {{"linear", {{"compute", "e4m3"}, {"backward_compute", "e4m3"}}},
                           {"conv2d", {{"compute", "e4m3"}, {"backward_compute", "e4m3"}}}};
        } else if (f != "HYBRID") {
          bad(where, "fp8_recipe.fp8_format", "expected \"E4M3\" or \"HYBRID\", got " + v.dump());
        }
      } else if (k == "amax_history_len" || k == "margin") {
        fp8[k] = v;
      } else if (k == "amax_compute_algo") {
        fp8[k] = v;
      } else if (k == "interval" || k == "override_linear_precision" || k == "reduce_amax" ||
                 k == "fp8_dpa" || k == "fp8_mha") {
        t.ignored.push_back("fp8_recipe." + k);
      } else {
        bad(where, "fp8_recipe." + k, "not a DelayedScaling field");
      }
    }
    policy["fp8"] = fp8;
    c["policy"] = policy;
  }
  return t;
}

}  // namespace rpsim::sim::train
