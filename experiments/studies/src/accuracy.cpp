// Study 5, `accuracy` (and `fixed-point`, the same runner on Gupta et al.'s
// policies): training curves and final test accuracy under each precision
// policy, with each run's distance from its FP64 shadow. Gupta et
// al., ICML 2015: 16-bit fixed point trains to fp32 accuracy with stochastic
// rounding but not with round to nearest; Zamirai et al., arXiv:2010.06192
// (2020): pure bf16 training loses accuracy to nearest-rounded weight updates,
// recovered by stochastic rounding or Kahan-compensated updates.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "rpsim/study/training_runs.hpp"

namespace rpsim::sim::study {
namespace {

struct RunSpec {
  std::string label, policy;  // policy: its name, or its object as JSON text
  nlohmann::json patch;       // the run's "set" with its "policy"
};

RunSpec run_spec(const StudyConfig& cfg, const nlohmann::json& spec, const std::string& where) {
  if (!spec.is_object() || !spec.contains("label") || !spec.at("label").is_string() ||
      !spec.contains("policy"))
    throw cfg.error(where,
                    "must be {\"label\": STRING, \"policy\": NAME or object, optional \"set\": "
                    "{\"dotted.key\": value, ...}}");
  RunSpec r;
  r.label = spec.at("label").get<std::string>();
  r.patch = spec.value("set", nlohmann::json::object());
  r.patch["policy"] = spec.at("policy");
  r.policy = spec.at("policy").is_string() ? spec.at("policy").get<std::string>() : spec.at("policy").dump();
  return r;
}

// fp8.csv, one row per step and FP8-quantised tensor of every run that has
// the FP8 columns in its steps.csv. Made on the first such run, so that a
// config without FP8 (the fixed-point study) writes exactly the tables it did.
void add_fp8_rows(StudyOutput& out, CsvTable*& fp8, const RunSpec& run, const TextTable& s) {
  const std::string suffix = "_fp8_amax";
  for (std::size_t c : s.columns_ending(suffix)) {
    const std::string tensor = s.columns[c].substr(0, s.columns[c].size() - suffix.size());
    const std::string at = tensor + "_fp8_";
    // MX runs have a range of block scales instead of one scale: left empty.
    const bool per_tensor = std::find(s.columns.begin(), s.columns.end(), at + "scale") != s.columns.end();
    if (!fp8)
      fp8 = &out.table("fp8.csv", {"run", "policy", "step", "tensor", "amax", "scale", "saturated_fraction",
                                   "flushed_fraction"});
    for (const auto& row : s.rows)
      fp8->row(run.label, run.policy, row[s.column("step")], tensor, row[c],
               per_tensor ? row[s.column(at + "scale")] : std::string(),
               row[s.column(at + "saturated_fraction")], row[s.column(at + "flushed_fraction")]);
  }
}

struct CurveSummary {
  double last_distance = NAN;  // at the last step
  double stalled_mean = 0;     // over the steps
};

// curves.csv's rows of one run: per step the means over layers of
// ||w - w_fp64|| / ||w_fp64|| and of the fraction of weights whose update
// rounded away.
CurveSummary add_curve_rows(CsvTable& curves, const RunSpec& run, const TextTable& s) {
  const auto dist = s.columns_ending("_weight_rel_distance_from_fp64");
  const auto stall = s.columns_ending("_weight_update_stalled_fraction");
  CurveSummary out;
  double stalled_sum = 0;
  for (const auto& row : s.rows) {
    double d = 0, stalled = 0;
    for (std::size_t c : dist) d += row[c].empty() ? NAN : std::stod(row[c]);
    for (std::size_t c : stall) stalled += std::stod(row[c]);
    d /= double(dist.size());
    stalled /= double(std::max<std::size_t>(1, stall.size()));
    out.last_distance = d;
    stalled_sum += stalled;
    curves.row(run.label, run.policy, row[s.column("step")], row[s.column("epoch")],
               row[s.column("loss_emulated_nats")], row[s.column("loss_fp64_nats")], d, stalled,
               row[s.column("skipped")]);
  }
  out.stalled_mean = stalled_sum / double(std::max<std::size_t>(1, s.rows.size()));
  return out;
}

}  // namespace

StudyOutput run_accuracy(const StudyOptions& options) {
  const StudyConfig& cfg = options.config;
  StudyOutput out;
  if (!cfg.has("runs") || !cfg.values().at("runs").is_array() || cfg.values().at("runs").empty())
    throw cfg.error("runs", "must be a non-empty array of {\"label\": ..., \"policy\": NAME or object}");
  auto& curves =
      out.table("curves.csv", {"run", "policy", "step", "epoch", "loss_emulated_nats", "loss_fp64_nats",
                               "weight_rel_distance_from_fp64", "weight_update_stalled_fraction", "skipped"});
  auto& evals = out.table("evaluations.csv",
                          {"run", "step", "epoch", "test_accuracy_percent", "fp64_test_accuracy_percent"});
  auto& summary = out.table("summary.csv",
                            {"run", "policy", "steps", "skipped_steps", "final_loss_nats",
                             "final_weight_rel_distance_from_fp64", "weight_update_stalled_fraction_mean",
                             "test_accuracy_percent", "fp64_test_accuracy_percent", "accuracy_gap_points"});
  CsvTable* fp8 = nullptr;
  nlohmann::json policies = nlohmann::json::array();
  std::size_t index = 0;
  for (const auto& spec : cfg.values().at("runs")) {
    const std::string where = fmt::format("runs[{}]", index++);
    const RunSpec rs = run_spec(cfg, spec, where);
    const std::string& label = rs.label;
    const std::string& policy = rs.policy;
    policies.push_back(spec.at("policy"));
    const TrainingRun run =
        run_training(training_config(cfg, rs.patch), fmt::format("{}: {}", cfg.path(), where));
    const TextTable& s = run.steps;
    add_fp8_rows(out, fp8, rs, s);
    const CurveSummary cs = add_curve_rows(curves, rs, s);
    const double last_distance = cs.last_distance, stalled_mean = cs.stalled_mean;
    for (const auto& e : run.result.evaluations)
      evals.row(label, e.step, e.epoch, e.test_accuracy_percent, e.shadow_test_accuracy_percent);
    // A config may turn the shadow off (a long run): its columns are then NaN.
    const bool shadow = !std::isnan(run.shadow_accuracy_percent);
    const double shadow_accuracy = run.shadow_accuracy_percent;
    summary.row(label, policy, std::int64_t(s.rows.size()), run.result.skipped_steps, run.result.final_loss,
                last_distance, stalled_mean, run.final_accuracy_percent, shadow_accuracy,
                run.final_accuracy_percent - shadow_accuracy);
    out.findings.push_back(
        shadow ? fmt::format("{:>16}: test accuracy {:.2f}% (fp64 shadow {:.2f}%), weights {:.2e} from fp64, "
                             "weights unmoved by a nonzero gradient {:.1f}% per step",
                             label, run.final_accuracy_percent, shadow_accuracy, last_distance,
                             100 * stalled_mean)
               : fmt::format("{:>16}: test accuracy {:.2f}% (no fp64 shadow), weights unmoved by a nonzero "
                             "gradient {:.1f}% per step",
                             label, run.final_accuracy_percent, 100 * stalled_mean));
    if (index == 1) describe_training(run, out);
  }
  // Runs trained only for fp8.csv (another FP8 scaling beside the one in
  // "runs"), kept out of the curves and the summary.
  if (cfg.has("fp8_scaling_runs")) {
    if (!cfg.values().at("fp8_scaling_runs").is_array())
      throw cfg.error("fp8_scaling_runs", "must be an array of runs, as \"runs\"");
    std::size_t k = 0;
    for (const auto& spec : cfg.values().at("fp8_scaling_runs")) {
      const std::string where = fmt::format("fp8_scaling_runs[{}]", k++);
      const RunSpec rs = run_spec(cfg, spec, where);
      add_fp8_rows(
          out, fp8, rs,
          run_training(training_config(cfg, rs.patch), fmt::format("{}: {}", cfg.path(), where)).steps);
    }
  }
  out.meta["policies"] = policies;
  // The formats the runs use, as the config lists them (the default: the
  // accuracy study's policies).
  out.meta["formats"] = cfg.has("formats") ? nlohmann::json(cfg.strings("formats"))
                                           : nlohmann::json{"binary32", "binary16", "bfloat16",
                                                            "e4m3",     "e5m2",     "binary64 (shadow)"};
  out.meta["seed"] = training_config(cfg).value("seed", 0);
  return out;
}

}  // namespace rpsim::sim::study
