// The plan of a training run and its time estimate, from the config alone.
#include "rpsim/config/run_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <variant>

#include "rpsim/config/framework_config.hpp"
#include "rpsim/io/progress.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/data.hpp"
#include "rpsim/train/model.hpp"

namespace rpsim::sim::config {

using namespace train;  // the typed values this layer fills in
namespace {

double extra_per_multiply_add(const sim::AccumulationModel& m) {
  return m.plan_seconds_per_multiply_add();  // the kind's row (accumulation_kinds.cpp)
}

// The measured base rate is fp32's: every format of the policy binary32
// (weights, data, gradients, optimizer, each op's inputs and outputs), so
// nothing is rounded below what the native kernels compute.
bool all_binary32(const PrecisionPolicy& p) {
  const auto b32 = [](const Format* f) { return !f || *f == formats::binary32(); };
  if (!b32(p.data) || !b32(p.weights) || !b32(p.master_weights) || !b32(p.gradients) ||
      !b32(p.optimizer_state) || !b32(p.optimizer_compute) || !b32(p.autocast_format))
    return false;
  for (const auto& [op, r] : p.ops)
    if (!r.follow_inputs && (!b32(r.compute) || !b32(r.output) || !b32(r.backward_compute))) return false;
  return true;
}

// The data's shape for the model and memory: a text set's as read (its
// vocabulary), an image set's the default Dataset's (1x28x28, 10 classes).
Dataset data_shape(const RunPlan& plan) {
  return plan.data ? plan.data->train : Dataset{};
}

// From the data-set table's row: sizes and source without reading images;
// a text set is read here, once, and handed to the run (RunPlan::data).
void count_data(const Config& config, RunPlan& plan) {
  DataFacts facts = data_facts(config.data);
  plan.synthetic_data = facts.synthetic;
  plan.train_samples = facts.train_samples;
  plan.test_samples = facts.test_samples;
  plan.data_source = std::move(facts.source);
  plan.data = std::move(facts.loaded);
}

// The row's description (every row has one: test_run_plan.cpp).
std::string model_text(const Config& c, const RunPlan& plan) {
  const ModelInfo* row = find_model_type(c.model.type);
  return fmt::format("{}; {} parameters", row ? row->describe(c.model) : c.model.type, plan.parameters);
}

std::string scaler_text(const ScalerConfig& s) {
  std::string upstream;
  std::vector<std::string> fields;
  for (const auto& row : loss_scalers())
    if (row.name == s.policy) {
      upstream = std::string(row.upstream);
      for (const auto& f : scaler_fields()) {
        if (!(row.fields & f.bit) || !f.is_set(s)) continue;
        fields.push_back(f.kind == ScalerFieldKind::flag ? std::string(f.name) + (f.get(s) ? " on" : " off")
                                                         : fmt::format("{} {:g}", f.name, f.get(s)));
      }
    }
  return fmt::format("{} ({}){}{}", s.policy, upstream, fields.empty() ? "" : ": ", fmt::join(fields, ", "));
}

}  // namespace

namespace {

// Seconds per unit of work, measured as user CPU time of `rpsim train CONFIG
// --threads 1 --quiet` on this project's machine (a 2-core AMD EPYC VM,
// shared, load 8-12) on 2026-11-26 at ae356e4, each config at 10 and 200
// steps: the difference is 190 steps, the rest start-up, loading and
// evaluation. A training step under fp32 with the FP64 shadow costs its
// model row's figure per multiply-add of its six matmuls (forward and two
// backward, emulated and shadow: 3 x batch x the row's forward
// multiply-adds) plus per_parameter per parameter (optimizer, telemetry):
//   mlp-fp32 784-256-256-10, batch 128: 15.5 ms a step (3.85 s in all);
//     batch 16: 6.2 ms; these two give 0.103 ns and 18 ns;
//     784-1024-1024-10 then predicts 107 ms a step: measured 106 ms;
//   gpt-fp32 (2 blocks 64 wide, 32 tokens, batch 8; 3.64M forward
//     multiply-adds a sample): 32.5 ms a step (6.76 s in all, 6.51 s again):
//     its attention's small matmuls, softmax and norms make 0.35 ns a
//     multiply-add;
//   cnn-fp16-amp (conv3x3 8/16, batch 64; 0.29M forward multiply-adds a
//     sample): 72.4 ms a step (19.25 s in all, 9.11 s at 10 steps, most of
//     it the evaluation): each convolution's unfolded matmul makes 1.2 ns
//     (under the fp16-amp factor). The custom layer list is priced as the
//     dearest row, since its layers are often convolutions.
// The single figure before (0.42 ns, 143 ns a parameter, 3 ms a step,
// measured before the matmul and optimizer speed-ups) over-estimated
// mlp-fp32 5x (19 s) and gpt-fp32 1.8x (12 s).
const ModelCost kModelCosts[] = {
    {"mlp", 0.103e-9},
    {"cnn", 1.2e-9},
    {"gpt", 0.35e-9},
    {"layers", 1.2e-9},
};
// Narrower policies cost policy_factor times a step (fp16-amp 1.08 and
// bf16-pure 1.07 on the mlp, bf16-amp 1.03 on the gpt); FP8 policies
// fp8_factor (each GEMM input scaled and quantised: mlp-fp8 4.2, gpt-fp8
// 2.63; 3.3 is within 1.3x of both); a run without the shadow
// no_shadow_factor (mlp 0.45). Evaluation is the forward multiply-adds of
// the test set at the row's figure, twice with the shadow (mlp: 0.47 s
// measured, 0.55 s so priced). Accumulation models other than
// native binary32 add their kind's row's figure per emulated multiply-add
// (accumulation_kinds.cpp; not re-measured here).
const PlanRates kRates{.models = kModelCosts,
                       .per_parameter = 18e-9,
                       .per_step = 0,
                       .policy_factor = 1.08,
                       .fp8_factor = 3.3,
                       .no_shadow_factor = 0.45,
                       .load_fashion_mnist = 0.3,  // start-up, gunzip and read the IDX files
                       .load_other = 0.05};

}  // namespace

const PlanRates& plan_rates() {
  return kRates;
}

double estimate_seconds(const Config& config, const RunPlan& plan, const PlanRates& rates) {
  // A row without a figure (a new model) is priced at the dearest one.
  double per_mac = 0;
  for (const ModelCost& m : rates.models) per_mac = std::max(per_mac, m.seconds_per_multiply_add);
  for (const ModelCost& m : rates.models)
    if (config.model.type == m.model) per_mac = m.seconds_per_multiply_add;
  const double step_macs = 3.0 * double(config.batch_size) * plan.forward_multiply_adds;
  const double factor = config.policy.fp8.scaling != Fp8Scaling::none ? rates.fp8_factor
                        : all_binary32(config.policy)                 ? 1.0
                                                                      : rates.policy_factor;
  const double shadow = config.shadow ? 1.0 : rates.no_shadow_factor;
  const double extra = extra_per_multiply_add(config.policy.rule("linear").accumulation);
  const double step =
      shadow * factor *
          (per_mac * step_macs + rates.per_parameter * double(plan.parameters) + rates.per_step) +
      extra * step_macs / 2;
  const double eval = double(plan.evaluations) * double(plan.test_samples) * plan.forward_multiply_adds *
                      (per_mac * (config.shadow ? 2 : 1) + extra);
  return double(plan.total_steps) * step + eval +
         (plan.synthetic_data || config.data.name != "fashion-mnist" ? rates.load_other
                                                                     : rates.load_fashion_mnist);
}

RunPlan plan_run(const Config& config) {
  RunPlan plan;
  count_data(config, plan);
  // The model's row sizes it from the config (model_size): the network is
  // built once, by the trainer, and a model too large is refused unbuilt.
  const ModelSize size = model_size(config, data_shape(plan));
  plan.parameters = std::int64_t(size.parameters);
  plan.forward_multiply_adds = size.forward_multiply_adds;
  plan.memory_bytes = memory_need_bytes(config, size);
  check_run_fits(config, plan.train_samples, plan.memory_bytes);
  plan.steps_per_epoch = std::int64_t((plan.train_samples + config.batch_size - 1) / config.batch_size);
  plan.total_steps = config.steps > 0 ? config.steps : plan.steps_per_epoch * config.epochs;
  if (config.evaluate && plan.test_samples > 0) plan.evaluations = config.steps > 0 ? 1 : config.epochs;
  plan.estimate_s = estimate_seconds(config, plan, plan_rates());
  return plan;
}

namespace {

// "(default)" for a section the config does not give.
std::string given(const LoadedConfig& l, const char* key) {
  return l.config.contains(key) ? "" : " (default: the config has no \"" + std::string(key) + "\")";
}

std::string policy_text(const PrecisionPolicy& p) {
  for (const auto& row : policies())
    if (row.name == p.base)
      return fmt::format("{}: {}{}", p.name, row.description,
                         p.name != p.base ? " (with the config's overrides, see meta.json)" : "");
  return p.name;
}

std::string steps_text(const Config& c, const RunPlan& plan) {
  if (c.steps > 0 && c.steps < plan.steps_per_epoch * c.epochs)
    return fmt::format(
        "{} of the {} in {} epoch{} (the config's \"steps\" limit; --set steps=0 runs the full {})",
        plan.total_steps, plan.steps_per_epoch * c.epochs, c.epochs, c.epochs > 1 ? "s" : "",
        c.epochs > 1 ? "epochs" : "epoch");
  if (c.steps > 0)
    return fmt::format("{} (the config's \"steps\"; {} per epoch)", plan.total_steps, plan.steps_per_epoch);
  return fmt::format("{} = {} epoch{} of {} (--set steps=N stops earlier)", plan.total_steps, c.epochs,
                     c.epochs > 1 ? "s" : "", plan.steps_per_epoch);
}

}  // namespace

std::string describe_run(const LoadedConfig& l, const Config& c, const RunPlan& plan,
                         const std::string& out_dir) {
  std::string s;
  auto line = [&s](const char* item, const std::string& text) {
    s += fmt::format("  {:<10} {}\n", item, text);
  };
  const FrameworkVocabulary& vocabulary = framework_vocabulary(l.vocabulary);
  line("config", fmt::format("{}, read as {}", l.where, vocabulary.read_as));
  line("model", model_text(c, plan) + given(l, "model"));
  line("data", fmt::format("{}: {} train, {} test samples{}", plan.data_source, plan.train_samples,
                           plan.test_samples, given(l, "data")));
  line("policy", policy_text(c.policy) + given(l, "policy"));
  line("scaler", scaler_text(c.loss_scaler.get()) +
                     (l.config.contains("loss_scaler") ? "" : " (the policy's default)"));
  const DeepSpeedSchedule& ds = c.optimizer.deepspeed;
  const std::string lr =
      ds.type.empty()
          ? fmt::format("lr {:g}", c.optimizer.lr)
          : fmt::format("lr by DeepSpeed's {} ({:g} to {:g}, {} warmup over {} steps)", ds.type, ds.min_lr,
                        ds.max_lr, ds.log_warmup ? "log" : "linear", ds.warmup_num_steps);
  const int k = c.gradient_accumulation_steps;
  const std::string accumulation =
      k == 1 ? ""
             : fmt::format(" in {} micro-batches of {}, their gradients summed in {}", k,
                           c.batch_size / std::size_t(k),
                           (c.grad_accum_format ? c.grad_accum_format : c.policy.gradients)->name);
  line("optimizer", fmt::format("{}, {}, batch {}{}{}", c.optimizer.type, lr, c.batch_size, accumulation,
                                given(l, "optimizer")));
  line("steps", steps_text(c, plan));
  line("shadow", c.shadow ? "FP64, trained in lockstep from the same weights and batches" : "off");
  line("output", out_dir.empty() ? std::string("none")
                                 : out_dir + "/ (steps.csv, histograms.csv, evaluations.csv, meta.json)");
  if (!l.notes.empty()) {
    s += fmt::format("  {}:\n", vocabulary.notes_heading);
    for (const auto& n : l.notes) s += "    " + n + "\n";
  }
  if (!l.ignored.empty())
    line("ignored", fmt::format("{} (no meaning in a simulator)", fmt::join(l.ignored, ", ")));
  line("memory", fmt::format("about {:.3g} MB at the peak (weights, gradients, optimizer state and a batch's "
                             "activations, as binary64 values{})",
                             plan.memory_bytes / 1e6, c.shadow ? ", twice for the FP64 shadow" : ""));
  line("estimate", fmt::format("about {} (rates measured on one core of this project's machine; the progress "
                               "lines give an ETA from the real rate)",
                               io::format_duration(plan.estimate_s)));
  return s;
}

}  // namespace rpsim::sim::config
