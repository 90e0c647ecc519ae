// The training loop: emulated network and FP64 shadow in lockstep, one step
// at a time, evaluation, and the result files.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "grad_accum.hpp"
#include "network.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/io/run_info.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/run_config.hpp"
#include "rpsim/train/step_ops.hpp"
#include "rpsim/train/trainer.hpp"
#include "telemetry.hpp"

namespace rpsim::sim::train {
namespace {

// Under adaptive loss scaling, the scale each parameter's gradient carries:
// its layer's entry of grad_scales (a GPT block's parameters, the block's).
std::map<const Parameter*, double> carried_scales(Network& net) {
  std::map<const Parameter*, double> out;
  for (std::size_t i = 0; i < net.model.layers.size(); ++i)
    for (Parameter* p : net.model.layers[i]->parameters()) out.emplace(p, net.grad_scales[i]);
  return out;
}

using Clock = std::chrono::steady_clock;

const PrecisionPolicy& fp64_policy() {
  static const PrecisionPolicy fp64 = named_policy("fp64");
  return fp64;
}

// What one emulated step did, for its steps.csv row.
struct StepOutcome {
  double loss = 0, scale = 1, grad_norm = NAN;
  bool found = false, skipped = false;
};

// The files an interrupted run wrote to `dir` (its meta.json says "partial"),
// then `dir` if that left it empty; a folder of anything else is kept.
void remove_partial(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir / "meta.json", ec)) return;
  try {
    std::ifstream in(dir / "meta.json");
    if (!nlohmann::json::parse(in).value("partial", false)) return;
  } catch (const std::exception&) {
    return;
  }
  for (const char* f : {"steps.csv", "histograms.csv", "evaluations.csv", "meta.json"})
    std::filesystem::remove(dir / f, ec);
  if (std::filesystem::is_empty(dir, ec)) std::filesystem::remove(dir, ec);
}

class Training {
 public:
  Training(const Config& config, const RunOptions& options, const DataSplit& data, RunResult& result)
      : config_(config),
        options_(options),
        data_(data),
        result_(result),
        emu_{build_model(config, data.train), &config.policy, nullptr, {}, 0, {}},
        shadow_{emu_.model.clone(), &fp64_policy(), nullptr, {}, 0, {}},
        scaler_(make_loss_scaler(config.loss_scaler)),
        telemetry_(emu_.model, config.policy, config.histogram_steps, scaler_->per_layer() != nullptr),
        inject_(config.inject_overflow_steps.begin(), config.inject_overflow_steps.end()) {
    emu_.optimizer = std::make_unique<Optimizer>(config.optimizer, config.policy, config.seed);
    shadow_.optimizer = std::make_unique<Optimizer>(config.optimizer, fp64_policy(), config.seed);
  }

  // Trains to the end or to an interrupt (result.interrupted).
  void train();
  void finish(Clock::time_point wall_start);

 private:
  Network* shadow() { return config_.shadow ? &shadow_ : nullptr; }
  double accumulated_backward(const std::vector<std::size_t>& idx, std::int64_t step, double scale,
                              Network& net, const PrecisionPolicy& policy, bool emulated);
  StepOutcome emulated_step(const std::vector<std::size_t>& idx, std::int64_t step);
  double shadow_step(const std::vector<std::size_t>& idx, std::int64_t step);
  void step(const std::vector<std::size_t>& idx, std::int64_t step, int epoch);
  void evaluate(std::int64_t step, int epoch, double epochs);
  nlohmann::json meta(Clock::time_point wall_start) const;
  std::string evaluations_csv() const;

  const Config& config_;
  const RunOptions& options_;
  const DataSplit& data_;
  RunResult& result_;
  Network emu_, shadow_;
  std::unique_ptr<LossScaler> scaler_;
  Telemetry telemetry_;
  std::set<std::int64_t> inject_;
  std::int64_t total_steps_ = 0;
  std::int64_t applied_steps_ = 0;  // steps not skipped (a DeepSpeed scheduler counts these)
  std::uint64_t activation_bytes_ = 0;
};

// The loss of the step's micro-batches (one without accumulation), their
// parameter gradients summed in the accumulator format. DeepSpeed's engine
// divides each micro-batch's loss by gradient_accumulation_steps in binary32
// before the loss scaler multiplies it (engine.py, backward and
// _scale_loss_by_gas; scale_wrt_gas defaults to true): the gradient seed is
// fl32(scale / k). Micro-batch m of step s draws its rounding streams as
// micro-step s*k + m (DeepSpeed's micro_steps): k = 1 keeps the step's own.
double Training::accumulated_backward(const std::vector<std::size_t>& idx, std::int64_t step, double scale,
                                      Network& net, const PrecisionPolicy& policy, bool emulated) {
  const int k_max = config_.gradient_accumulation_steps;
  // Micro-batches of batch_size / k samples: a short last batch of an epoch
  // has fewer (its loss divided by their count, so that it stays a mean).
  const auto micro = micro_batches(idx, config_.batch_size / std::size_t(k_max));
  const auto k = micro.size();
  const double seed = k == 1     ? scale
                      : emulated ? round_value(formats::binary32(), scale / double(k))
                                 : scale / double(k);
  const AdaptiveLossScaling* adaptive = emulated ? scaler_->per_layer() : nullptr;
  const std::vector<Parameter*> params = net.model.parameters();
  GradAccumulator acc(emulated ? config_.grad_accum_format ? config_.grad_accum_format : policy.gradients
                               : nullptr);
  double loss = 0;
  for (std::size_t m = 0; m < k; ++m) {
    const StepContext ctx{&policy, config_.seed, std::uint64_t(step) * std::uint64_t(k_max) + m};
    const double l = forward_backward(net, data_.train.batch(micro[m]), data_.train.targets(micro[m]), seed,
                                      ctx, adaptive);
    loss += k == 1 ? l : l / double(k);
    if (!emulated) {
      if (k > 1) acc.add(params);
      continue;
    }
    // An injected overflow goes into the step's first micro-batch: the sum
    // carries it to the step boundary, where the check finds it.
    if (m == 0 && inject_.count(step) && !params.empty()) params.front()->grad(0, 0) = INFINITY;
    if (options_.on_gradients) options_.on_gradients(step, int(m), params);
    if (k > 1) acc.add(params);
  }
  if (k > 1) {
    acc.store(params);
    if (emulated && options_.on_gradients) options_.on_gradients(step, -1, params);
  }
  return loss;
}

// Scaled backward over the micro-batches, then at the step boundary (where
// DeepSpeed's FP16_Optimizer.step and ZeRO check the accumulated gradients:
// fp16/fused_optimizer.py step -> has_overflow) unscale_, inf/NaN check,
// clip, scaler update (the optimizer step comes after the telemetry has read
// the gradients).
StepOutcome Training::emulated_step(const std::vector<std::size_t>& idx, std::int64_t step) {
  const PrecisionPolicy& policy = config_.policy;
  StepOutcome o;
  o.scale = scaler_->scale();
  const AdaptiveLossScaling* adaptive = scaler_->per_layer();
  o.loss = accumulated_backward(idx, step, o.scale, emu_, policy, true);
  auto params = emu_.model.parameters();
  const std::map<const Parameter*, double> carried = adaptive ? carried_scales(emu_) : decltype(carried){};
  const double global_inv = unscale_factor(o.scale);
  for (Parameter* p : params) {
    const auto it = carried.find(p);
    const double inv = it == carried.end() ? global_inv : unscale_factor(it->second);
    const Unscaled u = unscale({p->grad.data(), std::size_t(p->grad.size())}, inv, *policy.gradients);
    p->grad_underflow += u.flushed;
    o.found = o.found || u.nonfinite;
  }
  if (!o.found) o.grad_norm = clip_grad_norm(params, config_.max_grad_norm, policy);
  o.skipped = scaler_->update(o.found);
  result_.skipped_steps += o.skipped;
  return o;
}

// The shadow's step on the same micro-batches, every op in binary64.
double Training::shadow_step(const std::vector<std::size_t>& idx, std::int64_t step) {
  const ScopedNothingFlushed binary64;
  const double loss = accumulated_backward(idx, step, 1.0, shadow_, fp64_policy(), false);
  // Its norm is reported nowhere: computed only to clip.
  if (config_.max_grad_norm > 0)
    clip_grad_norm(shadow_.model.parameters(), config_.max_grad_norm, fp64_policy());
  return loss;
}

void Training::step(const std::vector<std::size_t>& idx, std::int64_t step, int epoch) {
  const double lr = config_.optimizer.lr_at(step, applied_steps_);
  emu_.optimizer->set_lr(lr);
  shadow_.optimizer->set_lr(lr);
  const StepOutcome o = emulated_step(idx, step);
  const double shadow_loss = config_.shadow ? shadow_step(idx, step) : NAN;
  // Telemetry: gradients before the update, weights after it.
  const std::string head = std::to_string(step) + "," + std::to_string(epoch) + "," + num(o.loss) + "," +
                           (config_.shadow ? num(shadow_loss) : "") + "," + num(o.scale) + "," +
                           (o.skipped ? "1" : "0") + "," + (o.found ? "1" : "0") + "," + num(o.grad_norm);
  telemetry_.add_histograms(step, o.scale, emu_, shadow());
  telemetry_.measure_gradients(emu_, shadow());
  applied_steps_ += o.skipped ? 0 : 1;
  if (!o.skipped)
    emu_.optimizer->step(emu_.model.parameters());
  else
    for (Parameter* p : emu_.model.parameters()) p->update_stalled = 0;  // nothing was updated
  if (config_.shadow) shadow_.optimizer->step(shadow_.model.parameters());
  telemetry_.add_row(head, emu_, shadow());
  result_.final_loss = o.loss;
  if (step == 0)
    for (auto& l : emu_.model.layers)
      for (const auto& [elements, fmt] : l->saved())
        if (fmt) activation_bytes_ += tensor_bytes(std::uint64_t(elements), *fmt);
  if (options_.on_step) options_.on_step(StepReport{step + 1, total_steps_, epoch, o.loss, o.scale});
}

void Training::evaluate(std::int64_t step, int epoch, double epochs) {
  if (!config_.evaluate || data_.test.size() == 0) return;
  Evaluation e;
  e.step = step;
  e.epoch = epoch;
  e.epochs = epochs;
  StepContext ctx{&config_.policy, config_.seed, std::uint64_t(step)};
  const TestScore s = score(emu_.model, config_.policy, data_.test, config_.eval_batch_size, ctx);
  e.test_accuracy_percent = s.accuracy_percent;
  e.test_loss_nats = s.loss_nats;
  if (config_.shadow) {
    StepContext sctx{&fp64_policy(), config_.seed, std::uint64_t(step)};
    const TestScore f = score(shadow_.model, fp64_policy(), data_.test, config_.eval_batch_size, sctx);
    e.shadow_test_accuracy_percent = f.accuracy_percent;
    e.shadow_test_loss_nats = f.loss_nats;
  }
  result_.evaluations.push_back(e);
  if (!options_.progress) return;
  std::fprintf(options_.progress, "%sstep %lld (%s): test accuracy %.2f%%",
               options_.progress_is_terminal ? "\n" : "", (long long)step, e.label().c_str(),
               e.test_accuracy_percent);
  if (config_.shadow)
    std::fprintf(options_.progress, " (fp64 shadow %.2f%%)", e.shadow_test_accuracy_percent);
  if (data_.train.text()) {
    std::fprintf(options_.progress, ", loss %.4f nats/token", e.test_loss_nats);
    if (config_.shadow) std::fprintf(options_.progress, " (fp64 shadow %.4f)", e.shadow_test_loss_nats);
  }
  std::fprintf(options_.progress, "\n");
}

void Training::train() {
  const std::size_t n = data_.train.size(), batch = config_.batch_size;
  const std::size_t per_epoch = (n + batch - 1) / batch;
  total_steps_ = config_.steps > 0 ? config_.steps : std::int64_t(per_epoch) * config_.epochs;
  std::int64_t step = 0;
  int epoch = 0;
  if (config_.eval_every > 0) evaluate(0, 0, 0.0);
  while (step < total_steps_ && !result_.interrupted) {
    const std::vector<std::size_t> order = epoch_order(n, config_.seed, std::uint64_t(epoch));
    for (std::size_t b = 0; b < per_epoch && step < total_steps_; ++b) {
      if (io::interrupted().load()) {
        result_.interrupted = true;
        break;
      }
      const std::vector<std::size_t> idx(order.begin() + long(b * batch),
                                         order.begin() + long(std::min(n, (b + 1) * batch)));
      this->step(idx, step, epoch);
      ++step;
      if (config_.eval_every > 0 && step % config_.eval_every == 0 && step < total_steps_)
        evaluate(step, epoch + 1, double(step) / double(per_epoch));  // in epoch `epoch + 1`, 1-based
    }
    if (result_.interrupted) break;
    ++epoch;
    if (config_.steps == 0 || step >= total_steps_) evaluate(step, epoch, double(step) / double(per_epoch));
  }
  result_.steps_done = step;
}

nlohmann::json Training::meta(Clock::time_point wall_start) const {
  nlohmann::json meta;
  meta["config"] = config_.source;
  meta["name"] = config_.name;
  meta["seed"] = config_.seed;
  meta["git_commit"] = io::git_commit();
  meta["policy"] = config_.policy.to_json();
  meta["loss_scaler"] = {{"policy", config_.loss_scaler->policy},
                         {"final_scale", result_.final_loss_scale},
                         {"state", scaler_->state()}};
  meta["data"] = {{"description", data_.description},
                  {"synthetic", data_.synthetic},
                  {"train_samples", data_.train.size()},
                  {"test_samples", data_.test.size()}};
  meta["parameters"] = result_.parameter_count;
  meta["memory"] = result_.memory.to_json();
  const int k = config_.gradient_accumulation_steps;
  meta["memory"]["activations_batch_size"] = config_.batch_size / std::size_t(k);  // one micro-batch's
  if (k > 1)
    meta["gradient_accumulation"] = {
        {"steps", k},
        {"format", (config_.grad_accum_format ? config_.grad_accum_format : config_.policy.gradients)->name}};
  meta["steps"] = result_.steps_done;
  // A run cut short by an interrupt keeps what it did, marked as such.
  meta["partial"] = result_.interrupted;
  meta["planned_steps"] = total_steps_;
  meta["skipped_steps"] = result_.skipped_steps;
  meta["shadow"] = config_.shadow;
  nlohmann::json evals = nlohmann::json::array();
  for (const auto& e : result_.evaluations)
    evals.push_back({{"step", e.step},
                     {"epoch", e.epoch},
                     {"epochs_done", e.epochs},
                     {"test_accuracy_percent", e.test_accuracy_percent},
                     {"test_loss_nats", e.test_loss_nats},
                     {"shadow_test_accuracy_percent",
                      config_.shadow ? nlohmann::json(e.shadow_test_accuracy_percent) : nlohmann::json()}});
  meta["evaluations"] = evals;
  meta["threads"] = omp_get_max_threads();
  meta["wall_time_seconds_nondeterministic"] =
      std::chrono::duration<double>(Clock::now() - wall_start).count();
  return meta;
}

std::string Training::evaluations_csv() const {
  std::string csv =
      "step,epoch,test_loss_emulated_nats,test_loss_fp64_nats,test_accuracy_emulated_percent,"
      "test_accuracy_fp64_percent\n";
  for (const auto& e : result_.evaluations)
    csv += std::to_string(e.step) + "," + std::to_string(e.epoch) + "," + num(e.test_loss_nats) + "," +
           (config_.shadow ? num(e.shadow_test_loss_nats) : "") + "," + num(e.test_accuracy_percent) + "," +
           (config_.shadow ? num(e.shadow_test_accuracy_percent) : "") + "\n";
  return csv;
}

void Training::finish(Clock::time_point wall_start) {
  result_.final_loss_scale = scaler_->scale();
  std::uint64_t param_count = 0;
  for (Parameter* p : emu_.model.parameters()) param_count += std::uint64_t(p->value.size());
  result_.parameter_count = param_count;
  result_.memory = memory_for(param_count, config_.policy, emu_.optimizer->state_buffers_per_parameter(),
                              activation_bytes_);
  result_.steps_csv = std::move(telemetry_.steps_csv);
  result_.histograms_csv = std::move(telemetry_.histograms_csv);
  result_.evaluations_csv = evaluations_csv();
  result_.meta = meta(wall_start);
  // An interrupted run's steps go to the partial folder, never to out_dir,
  // and the output folder the run created stays absent (removed only while
  // empty); a complete run removes the partial results of an earlier one.
  std::error_code ec;
  if (result_.interrupted && !options_.out_dir.empty() && std::filesystem::is_empty(options_.out_dir, ec))
    std::filesystem::remove(options_.out_dir, ec);
  if (!result_.interrupted && !options_.partial_out_dir.empty()) remove_partial(options_.partial_out_dir);
  const auto& dir = !result_.interrupted ? options_.out_dir : options_.partial_out_dir;
  if (dir.empty() || (result_.interrupted && result_.steps_done == 0)) return;
  if (result_.interrupted) io::ensure_writable_dir(dir);
  io::write_atomic(dir / "steps.csv", result_.steps_csv);
  io::write_atomic(dir / "histograms.csv", result_.histograms_csv);
  io::write_atomic(dir / "evaluations.csv", result_.evaluations_csv);
  io::write_atomic(dir / "meta.json", result_.meta.dump(2) + "\n");
}

}  // namespace

RunResult run(const Config& config, const RunOptions& options) {
  if (options.threads > 0) omp_set_num_threads(options.threads);
  const auto wall_start = Clock::now();
  RunResult result;
  const DataSplit read = options.data ? DataSplit{} : load_data(config.data);
  const DataSplit& data = options.data ? *options.data : read;
  if (data.train.size() == 0) throw ConfigError("data: the training set is empty");
  // Before anything is allocated or created (a run that cannot fit leaves no folder behind).
  check_run_fits(config, data.train.size(), memory_need_bytes(config, data.train));
  if (!options.out_dir.empty()) io::ensure_writable_dir(options.out_dir);
  result.synthetic_data = data.synthetic;
  result.data_description = data.description;
  if (options.progress && data.synthetic)
    std::fprintf(options.progress, "WARNING: %s\n", data.description.c_str());
  Training training(config, options, data, result);
  training.train();
  training.finish(wall_start);
  return result;
}

std::string Evaluation::label() const {
  if (std::fabs(epochs - std::round(epochs)) < 1e-9 && epochs >= 1) return fmt::format("epoch {}", epoch);
  return fmt::format("{:.2g} of epoch {}", epochs - std::floor(epochs), int(std::floor(epochs)) + 1);
}

}  // namespace rpsim::sim::train
