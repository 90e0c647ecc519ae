// The DeepSpeed row of the vocabulary table: a DeepSpeed config file read as
// DeepSpeed documents it (docs/config-json), translated field by field into
// rpsim's vocabulary. Each block is a table; the blocks' readers are in
// deepspeed_blocks.cpp, the batch fields' in deepspeed_batch.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "config_values.hpp"
#include "deepspeed_blocks.hpp"
#include "rpsim/config/config.hpp"
#include "rpsim/config/config_keys.hpp"
#include "rpsim/train/config_error.hpp"
#include "vocabulary_rows.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
namespace {

using namespace config_json;
using nlohmann::json;

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

// The row's translation: t.config holds the file as written.
void from_deepspeed(Translation& t, KeyReport& report) {
  const json ds = std::move(t.config);
  std::vector<std::string> autos;
  refuse_auto(ds, "", autos);
  if (!autos.empty())
    throw ConfigError(fmt::format("\"auto\" (filled in by Hugging Face's Trainer) at {}: give the values",
                                  fmt::join(autos, ", ")));
  t.config = json::object();
  DeepSpeed d{t, report, {}};
  check_object_keys(ds, deepspeed_keys(), "", report);
  for (const auto& k : kDeepSpeed)
    if (ds.contains(k.name)) k.read(ds[k.name], k.name, d);
  Translation enabled;  // kIgnored lists these blocks; here only refused when enabled
  ignore_unsimulated(ds, "", deepspeed_enabled_refused(), enabled);
  if (ds.contains("scheduler")) read_scheduler(ds["scheduler"], d);
  for (const char* k : kIgnored)
    if (ds.contains(k)) t.ignored.push_back(k);
  for (const auto& k : passthrough_keys())
    if (ds.contains(k)) t.config[k] = ds[k];
  translate_batch(d.batch, ds, t);
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

namespace {

// The same field under its two names (DeepSpeed's, rpsim's), from the tables.
std::vector<FieldName> name_pairs() {
  std::vector<FieldName> pairs{{"train_batch_size", "batch_size"},
                               {"train_micro_batch_size_per_gpu", "batch_size"},
                               {"data_types.grad_accum_dtype", "grad_accum_format"},
                               {"gradient_clipping", "max_grad_norm"},
                               {"fp16.enabled", "policy"},
                               {"bf16.enabled", "policy"},
                               {"fp16.loss_scale", "loss_scaler"}};
  for (const auto& f : fp16_scaler_fields())
    pairs.push_back({std::string("fp16.") + f.deepspeed, std::string("loss_scaler.") + f.scaler});
  for (const char* p : optimizer_params())
    pairs.push_back({std::string("optimizer.params.") + p, std::string("optimizer.") + p});
  return pairs;
}

}  // namespace

const FrameworkVocabulary& deepspeed_vocabulary() {
  static const FrameworkVocabulary row{
      .name = "deepspeed",
      .framework = "DeepSpeed",
      .scope = VocabularyScope::file,
      .read_as = "a DeepSpeed config",
      .notes_heading = "from the DeepSpeed config",
      .recognised_by =
          "a top-level key only DeepSpeed has (train_batch_size, fp16, bf16, zero_optimization, ...)",
      .help =
          "a DeepSpeed config file (docs/config-json): batch, fp16/bf16, gradient_clipping, optimizer, "
          "scheduler; rpsim keys DeepSpeed has no name for (steps, model, data, ...) may stand beside them. "
          "Hugging Face's \"auto\" values are refused",
      .recognise = looks_like_deepspeed,
      .translate = from_deepspeed,
      .field_names = name_pairs,
      .extension_keys = nullptr,
      .ignored = kIgnored,
      .refused = deepspeed_refused(),
  };
  return row;
}

}  // namespace rpsim::sim::config
