// Reading and checking a training configuration (rpsim's own vocabulary)
// before any work is done. Each section is a table of keys: the names a
// config may use, the unknown-key check and the reading all come from it.
#include <fmt/format.h>

#include <span>

#include "config_values.hpp"
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

// One key: its row (name, type, help) and how it is read; the section is
// the table the row is in.
struct Key {
  KeySpec key;
  void (*read)(const json& value, const std::string& path, Config& c) = nullptr;  // a value, or
  std::span<const Key> section = {};                                              // an object of these keys
  // Keys inside a value that is an object with its own tables (policy).
  void (*check)(const json& value, const std::string& path, KeyReport& report) = nullptr;
  // Keys inside a value read as a whole, from another library's table (loss_scaler).
  std::vector<KeySpec> (*inner)() = nullptr;
};

using T = KeyType;

const Key kModel[] = {
    {{"type", T::text, "a row of the model table (mlp, cnn, gpt, ...)"},
     [](const json& v, const std::string& p, Config& c) { c.model.type = one_of(v, p, model_names()); }},
    {{"hidden", T::integers, "MLP hidden widths"},
     [](const json& v, const std::string& p, Config& c) { c.model.hidden = positive_ints(v, p); }},
    {{"channels", T::integers, "CNN channels per convolution"},
     [](const json& v, const std::string& p, Config& c) { c.model.channels = positive_ints(v, p); }},
    {{"activation", T::text, "relu or gelu"},
     [](const json& v, const std::string& p, Config& c) {
       c.model.activation = one_of(v, p, {"relu", "gelu"});
     }},
    {{"layer_norm", T::flag, "a LayerNorm after each hidden layer"},
     [](const json& v, const std::string& p, Config& c) { c.model.layer_norm = boolean(v, p); }},
    {{"n_layer", T::integer, "gpt: blocks"},
     [](const json& v, const std::string& p, Config& c) { c.model.n_layer = size_at(v, p); }},
    {{"n_embd", T::integer, "gpt: embedding width"},
     [](const json& v, const std::string& p, Config& c) { c.model.n_embd = size_at(v, p); }},
    {{"n_head", T::integer, "gpt: attention heads"},
     [](const json& v, const std::string& p, Config& c) { c.model.n_head = size_at(v, p); }},
    {{"block_size", T::integer, "gpt: context length"},
     [](const json& v, const std::string& p, Config& c) { c.model.block_size = size_at(v, p); }},
    {{"layers", T::list, "a custom model: the op table's layers in order"},
     [](const json& v, const std::string&, Config& c) { c.model.layers = v; }},
};

const Key kData[] = {
    {{"name", T::text, "a row of the data-set table"},
     [](const json& v, const std::string& p, Config& c) { c.data.name = one_of(v, p, data_names()); }},
    {{"path", T::text, "the data set's folder"},
     [](const json& v, const std::string& p, Config& c) { c.data.path = string(v, p); }},
    {{"train_limit", T::integer, "use the first N training examples (0: all)"},
     [](const json& v, const std::string& p, Config& c) {
       c.data.train_limit = std::size_t(at_least(v, p, 0));
     }},
    {{"test_limit", T::integer, "use the first N test examples (0: all)"},
     [](const json& v, const std::string& p, Config& c) {
       c.data.test_limit = std::size_t(at_least(v, p, 0));
     }},
    {{"synthetic_train_size", T::integer, "training examples of the synthetic stand-in"},
     [](const json& v, const std::string& p, Config& c) {
       c.data.synthetic_train_size = std::size_t(at_least(v, p, 1));
     }},
    {{"synthetic_test_size", T::integer, "test examples of the synthetic stand-in"},
     [](const json& v, const std::string& p, Config& c) {
       c.data.synthetic_test_size = std::size_t(at_least(v, p, 1));
     }},
};

void read_betas(const json& b, const std::string& path, Config& c) {
  if (b.size() != 2) fail(path, "expected two numbers, got " + describe(b));
  for (std::size_t i = 0; i < 2; ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const double v = number(b[i], p);
    if (!(v >= 0 && v < 1)) fail(p, "must be in [0, 1)");
    c.optimizer.betas[i] = v;
  }
}

const Key kOptimizer[] = {
    {{"type", T::text, "sgd, adam or adamw"},
     [](const json& v, const std::string& p, Config& c) {
       c.optimizer.type = one_of(v, p, {"sgd", "adam", "adamw"});
     }},
    {{"lr", T::number, "learning rate"},
     [](const json& v, const std::string& p, Config& c) { c.optimizer.lr = non_negative(v, p); }},
    {{"momentum", T::number, "SGD momentum"},
     [](const json& v, const std::string& p, Config& c) { c.optimizer.momentum = non_negative(v, p); }},
    {{"weight_decay", T::number, "L2 (sgd, adam) or decoupled (adamw) weight decay"},
     [](const json& v, const std::string& p, Config& c) { c.optimizer.weight_decay = non_negative(v, p); }},
    {{"nesterov", T::flag, "Nesterov momentum (as torch.optim.SGD)"},
     [](const json& v, const std::string& p, Config& c) { c.optimizer.nesterov = boolean(v, p); }},
    {{"betas", T::numbers, "Adam's two decay rates"}, read_betas},
    {{"eps", T::number, "Adam's epsilon"},
     [](const json& v, const std::string& p, Config& c) { c.optimizer.eps = non_negative(v, p); }},
    {{"warmup_steps", T::integer, "linear warm-up steps"},
     [](const json& v, const std::string& p, Config& c) { c.optimizer.warmup_steps = steps_at(v, p); }},
    {{"decay_steps", T::integer, "cosine decay to min_lr by this step"},
     [](const json& v, const std::string& p, Config& c) { c.optimizer.decay_steps = steps_at(v, p); }},
    {{"min_lr", T::number, "the learning rate at decay_steps"},
     [](const json& v, const std::string& p, Config& c) { c.optimizer.min_lr = non_negative(v, p); }},
    {{"schedule", T::object, "a DeepSpeed scheduler block (its own table)"},
     [](const json& v, const std::string& p, Config& c) {
       c.optimizer.deepspeed = read_deepspeed_schedule(v, p);
     }},
};

const Key kTelemetry[] = {
    {{"histogram_steps", T::integers, "steps whose gradient histograms are written"},
     [](const json& v, const std::string& p, Config& c) { c.histogram_steps = step_list(v, p); }},
};

// A loss scaler's row name: an alias ("dynamic") becomes its row's name
// ("pytorch"); an unknown name stays, for resolve_scaler_config's error.
std::string scaler_row_name(const std::string& name) {
  const LossScalerInfo* row = find_loss_scaler(name);
  return row ? std::string(row->name) : name;
}

// Loss scaler: "policy" (a row of the loss-scaler table, or a row's alias)
// and the fields of ScalerConfig, typed by the scaling library's table.
std::vector<KeySpec> loss_scaler_keys() {
  std::vector<KeySpec> keys{{"policy", T::text, "a row of the loss-scaler table, or its alias"}};
  for (const auto& f : scaler_fields())
    keys.push_back({f.name,
                    f.kind == ScalerFieldKind::flag      ? T::flag
                    : f.kind == ScalerFieldKind::integer ? T::integer
                                                         : T::number,
                    "a ScalerConfig field (sim/scaling loss_scaler.hpp)"});
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

void read_name(const json& v, const std::string& p, Config& c) {
  // The name is a folder under results/ (results/<name>): one path
  // component, so a config cannot write outside results/.
  c.name = string(v, p);
  if (c.name.empty() || c.name == "." || c.name == ".." || c.name.find('/') != std::string::npos ||
      c.name.find('\\') != std::string::npos)
    fail(p, "\"" + c.name + "\" is not a folder name (results/<name>): no '/', not empty, '.' or '..'");
}

void read_grad_accum_format(const json& v, const std::string& p, Config& c) {
  const std::string s = string(v, p);
  try {
    c.grad_accum_format = &format(s);
  } catch (const FormatError& e) {
    fail(p, "unknown format \"" + s + "\" (" + e.what() + ")");
  }
}

// In reading order: the policy before the loss scaler its default depends on.
const Key kTop[] = {
    {{"name", T::text, "the run's folder: results/<name>"}, read_name},
    {{"comment", T::text, "free text, not read"}, [](const json&, const std::string&, Config&) {}},
    {{"seed", T::integer, "the seed of every random choice"},
     [](const json& v, const std::string& p, Config& c) { c.seed = std::uint64_t(at_least(v, p, 0)); }},
    {{"policy", T::text_or_object, "a named precision policy, or {\"name\": ..., overrides}"},
     read_policy,
     {},
     [](const json& v, const std::string& p, KeyReport& r) { check_policy_keys(v, p, r); }},
    {{"model", T::object, "the network"}, nullptr, kModel},
    {{"data", T::object, "the data set"}, nullptr, kData},
    {{"optimizer", T::object, "the optimizer and its schedule"}, nullptr, kOptimizer},
    {{"loss", T::text, "a loss of the op table"},
     [](const json& v, const std::string& p, Config& c) { c.loss = one_of(v, p, loss_names()); }},
    {{"batch_size", T::integer, "examples per optimizer step"},
     [](const json& v, const std::string& p, Config& c) { c.batch_size = std::size_t(at_least(v, p, 1)); }},
    {{"gradient_accumulation_steps", T::integer, "micro-batches per optimizer step"},
     [](const json& v, const std::string& p, Config& c) {
       const long long k = at_least(v, p, 1);
       if (k > 1 << 20) fail(p, "must be at most 2^20, got " + std::to_string(k));
       c.gradient_accumulation_steps = int(k);
     }},
    {{"grad_accum_format", T::text, "the format micro-batch gradients are summed in"},
     read_grad_accum_format},
    {{"epochs", T::integer, "passes over the training set (when steps is 0)"},
     [](const json& v, const std::string& p, Config& c) { c.epochs = int_in(v, p, 1, 1 << 30); }},
    {{"steps", T::integer, "optimizer steps (0: run `epochs` epochs)"},
     [](const json& v, const std::string& p, Config& c) {
       c.steps = integer(v, p);
       if (c.steps < 0) fail(p, "must be >= 0 (0: run `epochs` epochs)");
     }},
    {{"max_grad_norm", T::number, "gradient clipping norm (0: none)"},
     [](const json& v, const std::string& p, Config& c) { c.max_grad_norm = non_negative(v, p); }},
    {{"loss_scaler", T::object, "the loss scaler and its fields"},
     read_loss_scaler,
     {},
     nullptr,
     loss_scaler_keys},
    {{"shadow", T::flag, "run the FP64 shadow beside"},
     [](const json& v, const std::string& p, Config& c) { c.shadow = boolean(v, p); }},
    {{"telemetry", T::object, "what is recorded"}, nullptr, kTelemetry},
    {{"inject_overflow_steps", T::integers, "steps whose gradients are made to overflow"},
     [](const json& v, const std::string& p, Config& c) { c.inject_overflow_steps = step_list(v, p); }},
    {{"eval_batch_size", T::integer, "examples per evaluation batch"},
     [](const json& v, const std::string& p, Config& c) {
       c.eval_batch_size = std::size_t(at_least(v, p, 1));
     }},
    {{"evaluate", T::flag, "evaluate on the test set"},
     [](const json& v, const std::string& p, Config& c) { c.evaluate = boolean(v, p); }},
    {{"eval_every", T::integer, "evaluate every N steps (0: after each epoch)"},
     [](const json& v, const std::string& p, Config& c) { c.eval_every = steps_at(v, p); }},
};

// The one check of rpsim's vocabulary: unknown keys and wrong types, at every
// depth, from the tables; a value is looked into only when its type is right.
void check_keys_in(const json& j, std::span<const Key> keys, const std::string& path, KeyReport& report,
                   const std::vector<std::string>& also_known = {}) {
  if (!check_keys(j, key_specs(keys), path, report, also_known)) return;
  for (const Key& k : keys) {
    if (!j.contains(k.key.name) || !has_type(j[k.key.name], k.key.type)) continue;
    const std::string p = join(path, k.key.name);
    if (!k.read) check_keys_in(j[k.key.name], k.section, p, report);
    if (k.check && j[k.key.name].is_object()) k.check(j[k.key.name], p, report);
    if (k.inner) check_keys(j[k.key.name], k.inner(), p, report);
  }
}

// Reads keys check_keys_in has passed: their types are right.
void read_keys(const json& j, std::span<const Key> keys, const std::string& path, Config& c) {
  for (const Key& k : keys) {
    if (!j.contains(k.key.name)) continue;
    const std::string p = join(path, k.key.name);
    if (k.read)
      k.read(j[k.key.name], p, c);
    else
      read_keys(j[k.key.name], k.section, p, c);
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
  std::vector<std::string> out;
  for (const Key& k : kTop) out.emplace_back(k.key.name);
  return out;
}

std::vector<KeyHelp> config_key_help() {
  std::vector<KeyHelp> out;
  const auto add = [&out](auto& self, std::span<const Key> keys, const std::string& path) -> void {
    for (const Key& k : keys) {
      const std::string p = join(path, k.key.name);
      out.push_back({p, type_phrase(k.key.type), k.key.help});
      if (!k.read) self(self, k.section, p);
      if (k.inner)
        for (const KeySpec& i : k.inner()) out.push_back({join(p, i.name), type_phrase(i.type), i.help});
    }
  };
  add(add, kTop, "");
  return out;
}

void check_config_keys(const json& j, KeyReport& report, const std::vector<std::string>& also_known) {
  check_keys_in(j, kTop, "", report, also_known);
}

Config read_checked_config(const json& j) {
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

Config parse_config(const json& j) {
  KeyReport report;
  check_config_keys(j, report);
  report.throw_if_any();
  return read_checked_config(j);
}

}  // namespace rpsim::sim::config
