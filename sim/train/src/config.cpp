// Reading and checking a training configuration before any work is done.
#include <cmath>

#include "rpsim/train/config_error.hpp"
#include "rpsim/train/trainer.hpp"

namespace rpsim::sim::train {
namespace {

using namespace config_json;

std::vector<int> positive_ints(const nlohmann::json& j, const std::string& path) {
  if (!j.is_array()) fail(path, "expected a list of integers, got " + describe(j));
  std::vector<int> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const long long v = integer(j[i], p);
    if (v < 1) fail(p, "must be positive, got " + std::to_string(v));
    out.push_back(int(v));
  }
  return out;
}

std::vector<std::int64_t> step_list(const nlohmann::json& j, const std::string& path) {
  if (!j.is_array()) fail(path, "expected a list of step numbers, got " + describe(j));
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const long long v = integer(j[i], p);
    if (v < 0) fail(p, "must be a step number >= 0");
    out.push_back(v);
  }
  return out;
}

double non_negative(const nlohmann::json& j, const std::string& path) {
  const double v = number(j, path);
  if (!(v >= 0) || !std::isfinite(v)) fail(path, "must be a finite number >= 0, got " + describe(j));
  return v;
}

}  // namespace

void apply_override(nlohmann::json& j, const std::string& assignment) {
  const auto eq = assignment.find('=');
  // Config files are valid UTF-8 (the JSON parser checks); an override must
  // be too, or every later message and meta.json that shows it would fail.
  try {
    (void)nlohmann::json(assignment).dump();
  } catch (const nlohmann::json::type_error&) {
    const std::string shown =
        nlohmann::json(assignment).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    throw ConfigError("--set " + shown + ": not valid UTF-8");
  }
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set " + assignment + ": expected key=value (e.g. optimizer.lr=0.1)");
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    value = text;
  }
  nlohmann::json* node = &j;
  std::size_t start = 0;
  while (true) {
    const auto dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) throw ConfigError("--set " + assignment + ": empty key component");
    if (!node->is_object()) throw ConfigError("--set " + key + ": '" + part + "' is inside a non-object");
    if (dot == std::string::npos) {
      (*node)[part] = value;
      return;
    }
    node = &(*node)[part];
    if (node->is_null()) *node = nlohmann::json::object();
    start = dot + 1;
  }
}

Config parse_config(const nlohmann::json& j) {
  Config c;
  c.source = j;
  check_keys(j,
             {"name", "comment", "seed", "policy", "model", "data", "optimizer", "loss", "batch_size",
              "epochs", "steps", "max_grad_norm", "loss_scaler", "shadow", "telemetry",
              "inject_overflow_steps", "eval_batch_size", "evaluate"},
             "config");
  if (j.contains("name")) c.name = string(j["name"], "name");
  if (j.contains("comment")) (void)string(j["comment"], "comment");
  if (j.contains("seed")) {
    const long long s = integer(j["seed"], "seed");
    if (s < 0) fail("seed", "must be >= 0");
    c.seed = std::uint64_t(s);
  }
  c.policy = policy_from_json(j.contains("policy") ? j["policy"] : nlohmann::json("fp32"), "policy");

  if (j.contains("model")) {
    const auto& m = j["model"];
    check_keys(m, {"type", "hidden", "activation", "layer_norm", "channels"}, "model");
    if (m.contains("type")) {
      c.model.type = string(m["type"], "model.type");
      if (c.model.type != "mlp" && c.model.type != "cnn")
        fail("model.type", "expected \"mlp\" or \"cnn\", got \"" + c.model.type + "\"");
    }
    if (m.contains("hidden")) c.model.hidden = positive_ints(m["hidden"], "model.hidden");
    if (m.contains("channels")) c.model.channels = positive_ints(m["channels"], "model.channels");
    if (m.contains("activation")) {
      c.model.activation = string(m["activation"], "model.activation");
      if (c.model.activation != "relu" && c.model.activation != "gelu")
        fail("model.activation", "expected \"relu\" or \"gelu\", got \"" + c.model.activation + "\"");
    }
    if (m.contains("layer_norm")) c.model.layer_norm = boolean(m["layer_norm"], "model.layer_norm");
  }

  if (j.contains("data")) {
    const auto& d = j["data"];
    check_keys(d,
               {"name", "path", "train_limit", "test_limit", "synthetic_train_size", "synthetic_test_size"},
               "data");
    if (d.contains("name")) {
      c.data.name = string(d["name"], "data.name");
      if (c.data.name != "fashion-mnist" && c.data.name != "synthetic")
        fail("data.name", "expected \"fashion-mnist\" or \"synthetic\", got \"" + c.data.name + "\"");
    }
    if (d.contains("path")) c.data.path = string(d["path"], "data.path");
    auto count = [&](const char* key, std::size_t& field, bool allow_zero) {
      if (!d.contains(key)) return;
      const std::string p = std::string("data.") + key;
      const long long v = integer(d[key], p);
      if (v < 0 || (!allow_zero && v == 0)) fail(p, allow_zero ? "must be >= 0" : "must be positive");
      field = std::size_t(v);
    };
    count("train_limit", c.data.train_limit, true);
    count("test_limit", c.data.test_limit, true);
    count("synthetic_train_size", c.data.synthetic_train_size, false);
    count("synthetic_test_size", c.data.synthetic_test_size, false);
  }

  if (j.contains("optimizer")) {
    const auto& o = j["optimizer"];
    check_keys(o, {"type", "lr", "momentum", "weight_decay", "nesterov", "betas", "eps"}, "optimizer");
    if (o.contains("type")) {
      c.optimizer.type = string(o["type"], "optimizer.type");
      if (c.optimizer.type != "sgd" && c.optimizer.type != "adam" && c.optimizer.type != "adamw")
        fail("optimizer.type", "expected \"sgd\", \"adam\" or \"adamw\", got \"" + c.optimizer.type + "\"");
    }
    if (o.contains("lr")) c.optimizer.lr = non_negative(o["lr"], "optimizer.lr");
    if (o.contains("momentum")) c.optimizer.momentum = non_negative(o["momentum"], "optimizer.momentum");
    if (o.contains("weight_decay"))
      c.optimizer.weight_decay = non_negative(o["weight_decay"], "optimizer.weight_decay");
    if (o.contains("nesterov")) c.optimizer.nesterov = boolean(o["nesterov"], "optimizer.nesterov");
    if (o.contains("eps")) c.optimizer.eps = non_negative(o["eps"], "optimizer.eps");
    if (o.contains("betas")) {
      const auto& b = o["betas"];
      if (!b.is_array() || b.size() != 2) fail("optimizer.betas", "expected two numbers, got " + describe(b));
      for (int i = 0; i < 2; ++i) {
        const std::string p = "optimizer.betas[" + std::to_string(i) + "]";
        const double v = number(b[std::size_t(i)], p);
        if (!(v >= 0 && v < 1)) fail(p, "must be in [0, 1)");
        c.optimizer.betas[std::size_t(i)] = v;
      }
    }
    if (c.optimizer.nesterov && c.optimizer.momentum == 0)
      fail("optimizer.nesterov", "needs a momentum > 0 (as torch.optim.SGD)");
  }

  if (j.contains("loss")) {
    c.loss = string(j["loss"], "loss");
    if (c.loss != "cross_entropy" && c.loss != "mse_loss")
      fail("loss", "expected \"cross_entropy\" or \"mse_loss\", got \"" + c.loss + "\"");
  }
  if (j.contains("batch_size")) {
    const long long b = integer(j["batch_size"], "batch_size");
    if (b < 1) fail("batch_size", "must be at least 1, got " + std::to_string(b));
    c.batch_size = std::size_t(b);
  }
  if (j.contains("epochs")) {
    const long long e = integer(j["epochs"], "epochs");
    if (e < 1) fail("epochs", "must be at least 1, got " + std::to_string(e));
    c.epochs = int(e);
  }
  if (j.contains("steps")) {
    const long long s = integer(j["steps"], "steps");
    if (s < 0) fail("steps", "must be >= 0 (0: run `epochs` epochs)");
    c.steps = s;
  }
  if (j.contains("max_grad_norm")) c.max_grad_norm = non_negative(j["max_grad_norm"], "max_grad_norm");
  if (j.contains("shadow")) c.shadow = boolean(j["shadow"], "shadow");
  if (j.contains("evaluate")) c.evaluate = boolean(j["evaluate"], "evaluate");
  if (j.contains("eval_batch_size")) {
    const long long b = integer(j["eval_batch_size"], "eval_batch_size");
    if (b < 1) fail("eval_batch_size", "must be at least 1");
    c.eval_batch_size = std::size_t(b);
  }
  if (j.contains("telemetry")) {
    check_keys(j["telemetry"], {"histogram_steps"}, "telemetry");
    if (j["telemetry"].contains("histogram_steps"))
      c.histogram_steps = step_list(j["telemetry"]["histogram_steps"], "telemetry.histogram_steps");
  }
  if (j.contains("inject_overflow_steps"))
    c.inject_overflow_steps = step_list(j["inject_overflow_steps"], "inject_overflow_steps");

  // Loss scaler: parameter names as ScalerConfig (PyTorch GradScaler's).
  c.loss_scaler = ScalerConfig{};
  c.loss_scaler.policy = c.policy.default_loss_scaler == "dynamic" ? "pytorch" : "none";
  if (j.contains("loss_scaler")) {
    const auto& s = j["loss_scaler"];
    check_keys(s,
               {"policy", "init_scale", "growth_factor", "backoff_factor", "growth_interval", "hysteresis",
                "consecutive_hysteresis", "min_scale", "max_scale"},
               "loss_scaler");
    if (s.contains("policy")) {
      c.loss_scaler.policy = string(s["policy"], "loss_scaler.policy");
      if (c.loss_scaler.policy == "dynamic") c.loss_scaler.policy = "pytorch";
    }
    if (s.contains("init_scale"))
      c.loss_scaler.init_scale = number(s["init_scale"], "loss_scaler.init_scale");
    if (s.contains("growth_factor"))
      c.loss_scaler.growth_factor = number(s["growth_factor"], "loss_scaler.growth_factor");
    if (s.contains("backoff_factor"))
      c.loss_scaler.backoff_factor = number(s["backoff_factor"], "loss_scaler.backoff_factor");
    if (s.contains("growth_interval"))
      c.loss_scaler.growth_interval = integer(s["growth_interval"], "loss_scaler.growth_interval");
    if (s.contains("hysteresis"))
      c.loss_scaler.hysteresis = integer(s["hysteresis"], "loss_scaler.hysteresis");
    if (s.contains("consecutive_hysteresis"))
      c.loss_scaler.consecutive_hysteresis =
          boolean(s["consecutive_hysteresis"], "loss_scaler.consecutive_hysteresis");
    if (s.contains("min_scale")) c.loss_scaler.min_scale = number(s["min_scale"], "loss_scaler.min_scale");
    if (s.contains("max_scale")) c.loss_scaler.max_scale = number(s["max_scale"], "loss_scaler.max_scale");
  }
  try {
    c.loss_scaler = resolve_scaler_config(c.loss_scaler);
  } catch (const std::invalid_argument& e) {
    fail("loss_scaler", e.what());
  }
  return c;
}

}  // namespace rpsim::sim::train
