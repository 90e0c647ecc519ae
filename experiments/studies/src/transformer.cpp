// Study 6, `transformer`: a small character-level GPT trained under each
// precision policy beside its FP64 shadow, with validation loss every N
// steps. The question of Micikevicius et al. (ICLR 2018), asked of the
// networks trained in reduced precision today: does fp16 without loss
// scaling fail or degrade where fp32 and fp16 with dynamic scaling do not?
#include <fmt/format.h>

#include <cmath>

#include "rpsim/study/training_runs.hpp"

namespace rpsim::sim::study {
namespace {

// Mean over the row's per-layer columns `cols` (empty cells skipped).
double mean_of(const std::vector<std::string>& row, const std::vector<std::size_t>& cols) {
  double s = 0;
  int n = 0;
  for (std::size_t c : cols)
    if (!row[c].empty()) {
      s += std::stod(row[c]);
      ++n;
    }
  return n ? s / n : NAN;
}

}  // namespace

StudyOutput run_transformer(const StudyOptions& options) {
  const StudyConfig& cfg = options.config;
  StudyOutput out;
  if (!cfg.has("runs") || !cfg.values().at("runs").is_array() || cfg.values().at("runs").empty())
    throw cfg.error("runs", "must be a non-empty array of {\"label\": ..., \"set\": {...}}");
  auto& curves = out.table(
      "curves.csv", {"run", "step", "loss_emulated_nats", "loss_fp64_nats", "loss_scale", "skipped",
                     "activation_grad_underflow_fraction_mean", "weight_grad_underflow_fraction_mean"});
  auto& evals = out.table("evaluations.csv", {"run", "step", "val_loss_emulated_nats", "val_loss_fp64_nats"});
  auto& summary = out.table(
      "summary.csv", {"run", "policy", "loss_scaler", "steps", "skipped_steps", "val_loss_emulated_nats",
                      "val_loss_fp64_nats", "val_loss_gap_nats", "activation_grad_underflow_fraction_mean"});
  std::size_t index = 0;
  for (const auto& spec : cfg.values().at("runs")) {
    const std::string where = fmt::format("runs[{}]", index++);
    if (!spec.is_object() || !spec.contains("label") || !spec.at("label").is_string())
      throw cfg.error(where, "must be {\"label\": STRING, \"set\": {config keys to change}}");
    const std::string label = spec.at("label").get<std::string>();
    const nlohmann::json config = training_config(cfg, spec.value("set", nlohmann::json::object()));
    const TrainingRun run = run_training(config, fmt::format("{}: {}", cfg.path(), where));
    const TextTable& s = run.steps;
    const auto act = s.columns_ending("_activation_grad_underflow_fraction");
    const auto wgt = s.columns_ending("_weight_grad_underflow_fraction");
    double act_sum = 0;
    for (const auto& row : s.rows) {
      const double a = mean_of(row, act);
      act_sum += a;
      curves.row(label, row[s.column("step")], row[s.column("loss_emulated_nats")],
                 row[s.column("loss_fp64_nats")], row[s.column("loss_scale")], row[s.column("skipped")], a,
                 mean_of(row, wgt));
    }
    for (const auto& e : run.result.evaluations)
      evals.row(label, e.step, e.test_loss_nats, e.shadow_test_loss_nats);
    const auto& last = run.result.evaluations.back();
    const std::string policy = run.result.meta["policy"]["name"].get<std::string>();
    const std::string scaler = run.result.meta["loss_scaler"]["policy"].get<std::string>();
    const double wall = run.result.meta["wall_time_seconds_nondeterministic"].get<double>();
    const double act_mean = s.rows.empty() ? NAN : act_sum / double(s.rows.size());
    summary.row(label, policy, scaler, std::int64_t(s.rows.size()), run.result.skipped_steps,
                last.test_loss_nats, last.shadow_test_loss_nats,
                last.test_loss_nats - last.shadow_test_loss_nats, act_mean);
    out.meta["wall_time_s_by_run"][label] = wall;
    out.findings.push_back(
        fmt::format("{:>18}: validation loss {:.4f} nats/token (fp64 shadow {:.4f}), {} skipped steps, "
                    "{:.3g}% of activation gradients flushed per step, {:.0f} s",
                    label, last.test_loss_nats, last.shadow_test_loss_nats, run.result.skipped_steps,
                    100 * act_mean, wall));
    if (index == 1) {
      describe_training(run, out);
      out.meta["parameters"] = run.result.meta["parameters"];
    }
  }
  out.meta["formats"] = {"binary32", "binary16", "bfloat16", "e4m3", "e5m2", "binary64 (shadow)"};
  out.meta["seed"] = training_config(cfg).value("seed", 0);
  return out;
}

}  // namespace rpsim::sim::study
