// Study 4, `loss-scale`: the same fp16 run under every framework's loss
// scaler, with overflows provoked (a large initial scale, and infs injected
// into the gradients at chosen steps): scale against step, skipped steps,
// final accuracy.
#include <fmt/format.h>

#include <cmath>

#include "rpsim/study/training_runs.hpp"

namespace rpsim::sim::study {

StudyOutput run_loss_scale(const StudyOptions& options) {
  const StudyConfig& cfg = options.config;
  StudyOutput out;
  if (!cfg.has("scalers") || !cfg.values().at("scalers").is_array() || cfg.values().at("scalers").empty())
    throw cfg.error("scalers", "must be a non-empty array of loss_scaler objects ({\"policy\": ...})");
  auto& trace = out.table("scale_trace.csv", {"scaler", "step", "loss_scale", "skipped", "overflow_found",
                                              "loss_emulated_nats", "loss_fp64_nats"});
  auto& summary =
      out.table("summary.csv", {"scaler", "steps", "skipped_steps", "overflow_steps", "min_loss_scale",
                                "max_loss_scale", "final_loss_scale", "final_loss_nats",
                                "test_accuracy_percent", "fp64_test_accuracy_percent"});
  std::size_t index = 0;
  for (const auto& scaler : cfg.values().at("scalers")) {
    const std::string where = fmt::format("scalers[{}]", index++);
    if (!scaler.is_object() || !scaler.contains("policy") || !scaler.at("policy").is_string())
      throw cfg.error(where, "must be an object with a \"policy\" string");
    const std::string label = scaler.value("label", scaler.at("policy").get<std::string>());
    nlohmann::json settings = scaler;
    settings.erase("label");
    nlohmann::json patch;
    patch["loss_scaler"] = settings;
    const TrainingRun run =
        run_training(training_config(cfg, patch), fmt::format("{}: {}", cfg.path(), where));
    const TextTable& s = run.steps;
    const auto c_step = s.column("step"), c_scale = s.column("loss_scale"), c_skip = s.column("skipped"),
               c_over = s.column("overflow_found"), c_loss = s.column("loss_emulated_nats"),
               c_fp64 = s.column("loss_fp64_nats");
    double lo = INFINITY, hi = 0;
    std::int64_t overflows = 0;
    for (const auto& row : s.rows) {
      const double scale = std::stod(row[c_scale]);
      lo = std::min(lo, scale), hi = std::max(hi, scale);
      overflows += row[c_over] == "1";
      trace.row(label, row[c_step], scale, row[c_skip], row[c_over], row[c_loss], row[c_fp64]);
    }
    summary.row(label, std::int64_t(s.rows.size()), run.result.skipped_steps, overflows, lo, hi,
                run.result.final_loss_scale, run.result.final_loss, run.final_accuracy_percent,
                run.shadow_accuracy_percent);
    out.findings.push_back(
        fmt::format("{:>10}: {} of {} steps skipped, scale {:g}..{:g} (final {:g}), test accuracy {:.2f}%",
                    label, run.result.skipped_steps, s.rows.size(), lo, hi, run.result.final_loss_scale,
                    run.final_accuracy_percent));
    if (index == 1) describe_training(run, out);
  }
  out.meta["formats"] = {"binary16", "binary32", "binary64 (shadow)"};
  out.meta["seed"] = training_config(cfg).value("seed", 0);
  out.meta["policy"] = training_config(cfg).value("policy", nlohmann::json("?"));
  return out;
}

}  // namespace rpsim::sim::study
