// Reading and checking a training configuration (rpsim's own vocabulary)
// before any work is done. Each section is a table of keys: the names a
// config may use, the unknown-key check and the reading all come from it.
#include <fmt/format.h>

#include <cmath>
#include <span>

#include "policy_read.hpp"
#include "rpsim/config/config.hpp"
#include "rpsim/config/config_keys.hpp"
#include "rpsim/config/policy_json.hpp"
#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
namespace {

using namespace config_json;
using nlohmann::json;

struct Key {
  const char* name;
  void (*read)(const json& value, const std::string& path, Config& c) = nullptr;  // a value, or
  std::span<const Key> section = {};                                              // an object of these keys
  // Keys inside a value that is an object with its own table (policy, loss_scaler).
  void (*check)(const json& value, const std::string& path, KeyReport& report) = nullptr;
};

std::vector<std::string> names(std::span<const Key> keys) {
  std::vector<std::string> out;
  for (const Key& k : keys) out.emplace_back(k.name);
  return out;
}

std::vector<int> positive_ints(const json& j, const std::string& path) {
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

std::vector<std::int64_t> step_list(const json& j, const std::string& path) {
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

double non_negative(const json& j, const std::string& path) {
  const double v = number(j, path);
  if (!(v >= 0) || !std::isfinite(v)) fail(path, "must be a finite number >= 0, got " + describe(j));
  return v;
}

long long at_least(const json& j, const std::string& path, long long low) {
  const long long v = integer(j, path);
  if (v < low) fail(path, fmt::format("must be at least {}, got {}", low, v));
  return v;
}

std::string one_of(const json& j, const std::string& path, const std::vector<std::string>& allowed) {
  const std::string s = string(j, path);
  if (std::find(allowed.begin(), allowed.end(), s) != allowed.end()) return s;
  fail(path, fmt::format("expected one of {}, got \"{}\"{}", fmt::join(allowed, ", "), s,
                         did_you_mean(s, allowed)));
}

std::int64_t steps_at(const json& j, const std::string& path) {
  return at_least(j, path, 0);
}

// A width or count of the gpt model: a positive integer.
int size_at(const json& j, const std::string& path) {
  const long long v = at_least(j, path, 1);
  if (v > 1 << 20) fail(path, "must be at most 2^20, got " + std::to_string(v));
  return int(v);
}

std::vector<std::string> model_names() {
  std::vector<std::string> n;
  for (const auto& m : model_types()) n.emplace_back(m.name);
  return n;
}

std::vector<std::string> data_names() {
  std::vector<std::string> n;
  for (const auto& d : data_sets()) n.emplace_back(d.name);
  return n;
}

// The losses of the op table.
std::vector<std::string> loss_names() {
  std::vector<std::string> n;
  for (const auto& o : ops())
    if (o.loss) n.emplace_back(o.name);
  return n;
}

const Key kModel[] = {
    {"type",
     [](const json& v, const std::string& p, Config& c) { c.model.type = one_of(v, p, model_names()); }},
    {"hidden", [](const json& v, const std::string& p, Config& c) { c.model.hidden = positive_ints(v, p); }},
    {"channels",
     [](const json& v, const std::string& p, Config& c) { c.model.channels = positive_ints(v, p); }},
    {"activation",
     [](const json& v, const std::string& p, Config& c) {
       c.model.activation = one_of(v, p, {"relu", "gelu"});
     }},
    {"layer_norm",
     [](const json& v, const std::string& p, Config& c) { c.model.layer_norm = boolean(v, p); }},
    {"n_layer", [](const json& v, const std::string& p, Config& c) { c.model.n_layer = size_at(v, p); }},
    {"n_embd", [](const json& v, const std::string& p, Config& c) { c.model.n_embd = size_at(v, p); }},
    {"n_head", [](const json& v, const std::string& p, Config& c) { c.model.n_head = size_at(v, p); }},
    {"block_size",
     [](const json& v, const std::string& p, Config& c) { c.model.block_size = size_at(v, p); }},
    {"layers",
     [](const json& v, const std::string& p, Config& c) {
       if (!v.is_array() || v.empty()) fail(p, "expected a non-empty list of layers, got " + describe(v));
       c.model.layers = v;
     }},
};

const Key kData[] = {
    {"name",
     [](const json& v, const std::string& p, Config& c) { c.data.name = one_of(v, p, data_names()); }},
    {"path", [](const json& v, const std::string& p, Config& c) { c.data.path = string(v, p); }},
    {"train_limit", [](const json& v, const std::string& p,
                       Config& c) { c.data.train_limit = std::size_t(at_least(v, p, 0)); }},
    {"test_limit", [](const json& v, const std::string& p,
                      Config& c) { c.data.test_limit = std::size_t(at_least(v, p, 0)); }},
    {"synthetic_train_size", [](const json& v, const std::string& p,
                                Config& c) { c.data.synthetic_train_size = std::size_t(at_least(v, p, 1)); }},
    {"synthetic_test_size", [](const json& v, const std::string& p,
                               Config& c) { c.data.synthetic_test_size = std::size_t(at_least(v, p, 1)); }},
};

void read_betas(const json& b, const std::string& path, Config& c) {
  if (!b.is_array() || b.size() != 2) fail(path, "expected two numbers, got " + describe(b));
  for (std::size_t i = 0; i < 2; ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const double v = number(b[i], p);
    if (!(v >= 0 && v < 1)) fail(p, "must be in [0, 1)");
    c.optimizer.betas[i] = v;
  }
}

const Key kOptimizer[] = {
    {"type",
     [](const json& v, const std::string& p, Config& c) {
       c.optimizer.type = one_of(v, p, {"sgd", "adam", "adamw"});
     }},
    {"lr", [](const json& v, const std::string& p, Config& c) { c.optimizer.lr = non_negative(v, p); }},
    {"momentum",
     [](const json& v, const std::string& p, Config& c) { c.optimizer.momentum = non_negative(v, p); }},
    {"weight_decay",
     [](const json& v, const std::string& p, Config& c) { c.optimizer.weight_decay = non_negative(v, p); }},
    {"nesterov",
     [](const json& v, const std::string& p, Config& c) { c.optimizer.nesterov = boolean(v, p); }},
    {"betas", read_betas},
    {"eps", [](const json& v, const std::string& p, Config& c) { c.optimizer.eps = non_negative(v, p); }},
    {"warmup_steps",
     [](const json& v, const std::string& p, Config& c) { c.optimizer.warmup_steps = steps_at(v, p); }},
    {"decay_steps",
     [](const json& v, const std::string& p, Config& c) { c.optimizer.decay_steps = steps_at(v, p); }},
    {"min_lr",
     [](const json& v, const std::string& p, Config& c) { c.optimizer.min_lr = non_negative(v, p); }},
    {"schedule", [](const json& v, const std::string& p,
                    Config& c) { c.optimizer.deepspeed = read_deepspeed_schedule(v, p); }},
};

const Key kTelemetry[] = {
    {"histogram_steps",
     [](const json& v, const std::string& p, Config& c) { c.histogram_steps = step_list(v, p); }},
};

// A loss scaler's row name: an alias ("dynamic") becomes its row's name
// ("pytorch"); an unknown name stays, for resolve_scaler_config's error.
std::string scaler_row_name(const std::string& name) {
  const LossScalerInfo* row = find_loss_scaler(name);
  return row ? std::string(row->name) : name;
}

// Loss scaler: "policy" (a row of the loss-scaler table, or a row's alias) and the fields of ScalerConfig,
// from the scaling library's table.
std::vector<std::string> loss_scaler_keys() {
  std::vector<std::string> keys{"policy"};
  for (const auto& f : scaler_fields()) keys.emplace_back(f.name);
  return keys;
}

// The run's scaler, resolved here once (its row's defaults filled in, its
// values checked): the trainer's factory takes the typed result as it is.
ResolvedScalerConfig resolved(const ScalerConfig& given) {
  try {
    return resolve_scaler_config(given);
  } catch (const std::invalid_argument& e) {
    fail("loss_scaler", e.what());
  }
}

// The policy's default scaler (the policy is read first), unless the section
// names another, with the section's fields.
void read_loss_scaler(const json& s, const std::string& path, Config& c) {
  expect_object(s, path);
  ScalerConfig given;
  given.policy = scaler_row_name(c.policy.default_loss_scaler);
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string p = join(path, it.key());
    if (it.key() == "policy") {
      given.policy = scaler_row_name(string(*it, p));
      continue;
    }
    for (const auto& f : scaler_fields())
      if (it.key() == f.name)
        f.set(given, f.kind == ScalerFieldKind::flag      ? double(boolean(*it, p))
                     : f.kind == ScalerFieldKind::integer ? double(integer(*it, p))
                                                          : number(*it, p));
  }
  c.loss_scaler = resolved(given);
}

void read_policy(const json& v, const std::string& p, Config& c) {
  c.policy = read_checked_policy(v, p);  // its keys checked with the config's
}

// In reading order: the policy before the loss scaler its default depends on.
const Key kTop[] = {
    {"name",
     [](const json& v, const std::string& p, Config& c) {
       // The name is a folder under results/ (results/<name>): one path
       // component, so a config cannot write outside results/.
       c.name = string(v, p);
       if (c.name.empty() || c.name == "." || c.name == ".." || c.name.find('/') != std::string::npos ||
           c.name.find('\\') != std::string::npos)
         fail(p, "\"" + c.name + "\" is not a folder name (results/<name>): no '/', not empty, '.' or '..'");
     }},
    {"comment", [](const json& v, const std::string& p, Config&) { (void)string(v, p); }},
    {"seed",
     [](const json& v, const std::string& p, Config& c) { c.seed = std::uint64_t(at_least(v, p, 0)); }},
    {"policy",
     read_policy,
     {},
     [](const json& v, const std::string& p, KeyReport& r) { check_policy_keys(v, p, r); }},
    {"model", nullptr, kModel},
    {"data", nullptr, kData},
    {"optimizer", nullptr, kOptimizer},
    {"loss", [](const json& v, const std::string& p, Config& c) { c.loss = one_of(v, p, loss_names()); }},
    {"batch_size",
     [](const json& v, const std::string& p, Config& c) { c.batch_size = std::size_t(at_least(v, p, 1)); }},
    {"gradient_accumulation_steps",
     [](const json& v, const std::string& p, Config& c) {
       const long long k = at_least(v, p, 1);
       if (k > 1 << 20) fail(p, "must be at most 2^20, got " + std::to_string(k));
       c.gradient_accumulation_steps = int(k);
     }},
    {"grad_accum_format",
     [](const json& v, const std::string& p, Config& c) {
       const std::string s = string(v, p);
       try {
         c.grad_accum_format = &format(s);
       } catch (const FormatError& e) {
         fail(p, "unknown format \"" + s + "\" (" + e.what() + ")");
       }
     }},
    {"epochs", [](const json& v, const std::string& p, Config& c) { c.epochs = int(at_least(v, p, 1)); }},
    {"steps",
     [](const json& v, const std::string& p, Config& c) {
       c.steps = integer(v, p);
       if (c.steps < 0) fail(p, "must be >= 0 (0: run `epochs` epochs)");
     }},
    {"max_grad_norm",
     [](const json& v, const std::string& p, Config& c) { c.max_grad_norm = non_negative(v, p); }},
    {"loss_scaler",
     read_loss_scaler,
     {},
     [](const json& v, const std::string& p, KeyReport& r) {
       check_object_keys(v, loss_scaler_keys(), p, r);
     }},
    {"shadow", [](const json& v, const std::string& p, Config& c) { c.shadow = boolean(v, p); }},
    {"telemetry", nullptr, kTelemetry},
    {"inject_overflow_steps",
     [](const json& v, const std::string& p, Config& c) { c.inject_overflow_steps = step_list(v, p); }},
    {"eval_batch_size", [](const json& v, const std::string& p,
                           Config& c) { c.eval_batch_size = std::size_t(at_least(v, p, 1)); }},
    {"evaluate", [](const json& v, const std::string& p, Config& c) { c.evaluate = boolean(v, p); }},
    {"eval_every", [](const json& v, const std::string& p, Config& c) { c.eval_every = steps_at(v, p); }},
};

void check_keys_in(const json& j, std::span<const Key> keys, const std::vector<std::string>& known,
                   const std::string& path, KeyReport& report) {
  if (!check_object_keys(j, known, path, report)) return;
  for (const Key& k : keys) {
    if (!j.contains(k.name)) continue;
    const std::string p = join(path, k.name);
    if (!k.read) check_keys_in(j[k.name], k.section, names(k.section), p, report);
    if (k.check && j[k.name].is_object()) k.check(j[k.name], p, report);
  }
}

void read_keys(const json& j, std::span<const Key> keys, const std::string& path, Config& c) {
  for (const Key& k : keys) {
    if (!j.contains(k.name)) continue;
    const std::string p = join(path, k.name);
    if (k.read) {
      k.read(j[k.name], p, c);
    } else {
      expect_object(j[k.name], p);
      read_keys(j[k.name], k.section, p, c);
    }
  }
}

// DeepSpeed asserts train_batch_size == micro_batch x gradient_accumulation_steps
// x world size (runtime/config.py, _batch_assertion); one simulated device.
void check_accumulation(const Config& c) {
  const auto k = std::size_t(c.gradient_accumulation_steps);
  if (c.batch_size % k != 0)
    fail("gradient_accumulation_steps",
         fmt::format("batch_size {} is not a multiple of gradient_accumulation_steps {} (batch_size is the "
                     "batch of one optimizer step: micro-batch x accumulation steps, as DeepSpeed's "
                     "train_batch_size)",
                     c.batch_size, k));
  // Per-layer factors are chosen from each backward's gradients: micro-batches
  // would carry different scales into one sum.
  if (k > 1 && c.loss_scaler->policy == "adaptive")
    fail("gradient_accumulation_steps",
         fmt::format("{} micro-batches under the adaptive loss scaler are not simulated (each backward "
                     "chooses its own per-layer scales); use 1 or another loss_scaler",
                     k));
}

// Checks that need more than one key.
void check_combinations(const json& j, Config& c) {
  if (c.optimizer.nesterov && c.optimizer.momentum == 0)
    fail("optimizer.nesterov", "needs a momentum > 0 (as torch.optim.SGD)");
  if (!c.optimizer.deepspeed.type.empty() && (c.optimizer.warmup_steps > 0 || c.optimizer.decay_steps > 0))
    fail("optimizer.schedule", "a DeepSpeed schedule and warmup_steps/decay_steps exclude each other");
  if (c.optimizer.decay_steps > 0 && c.optimizer.decay_steps <= c.optimizer.warmup_steps)
    fail("optimizer.decay_steps", "must exceed optimizer.warmup_steps");
  // Debian's folder may lack the files (a synthetic set stands in, loudly);
  // a folder the config names must hold them.
  const bool path_given = j.contains("data") && j["data"].contains("path");
  const DataSetInfo* row = find_data_set(c.data.name);
  if (row && row->missing_files && path_given && c.data.path != row->default_path) {
    const auto missing = row->missing_files(c.data.path);
    if (missing.size() == row->missing_files("").size())
      fail("data.path", fmt::format("no {} files in '{}' (is the folder right?)", row->name, c.data.path));
    if (!missing.empty())
      fail("data.path", fmt::format("'{}' lacks {} (or .gz)", c.data.path, fmt::join(missing, ", ")));
  }
  check_accumulation(c);
}

}  // namespace

std::vector<std::string> config_keys() {
  return names(kTop);
}

void check_config_keys(const json& j, KeyReport& report, const std::vector<std::string>& also_known) {
  std::vector<std::string> known = names(kTop);
  known.insert(known.end(), also_known.begin(), also_known.end());
  check_keys_in(j, kTop, known, "", report);
}

Config parse_config(const json& j) {
  KeyReport report;
  check_config_keys(j, report);
  report.throw_if_any();
  Config c;
  c.source = j;
  c.policy = named_policy("fp32");
  read_keys(j, kTop, "", c);
  if (!j.contains("loss_scaler")) {  // the policy's default scaler
    ScalerConfig given;
    given.policy = scaler_row_name(c.policy.default_loss_scaler);
    c.loss_scaler = resolved(given);
  }
  c.data.context = c.model.block_size;
  check_combinations(j, c);
  return c;
}

}  // namespace rpsim::sim::config
