// Study 3, `underflow`: how many fp16 gradients vanish, and how many does
// each loss scale bring back? Micikevicius et al., "Mixed Precision
// Training", ICLR 2018, Fig. 3: 67% of SSD's activation gradients were zero in
// fp16, and scaling by 8 to 32K recovered them without overflow.
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "rpsim/study/training_runs.hpp"

namespace rpsim::sim::study {

namespace {

struct ScaleRun {
  std::string label;        // "1", "8", ..., "dynamic"
  double static_scale = 0;  // 0: dynamic
  TrainingRun run;
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / double(v.size());
}

// Micikevicius et al.'s method (their Fig. 3): from the FP64 magnitudes
// log2|g| (the shadow sees the same weights and batches in every run), the
// fraction that a scale S would flush to zero in fp16 (|S g| < 2^-25, half the
// smallest subnormal) or push past the largest finite (|S g| >= 2^16, which
// rounds to infinity). Bins straddling either edge count as representable.
void predicted_table(const TextTable& h, StudyOutput& out) {
  auto& table = out.table("predicted.csv", {"step", "tensor", "log2_scale", "scale", "fp64_nonzero_count",
                                            "underflow_fraction", "overflow_fraction"});
  std::map<std::pair<std::int64_t, std::string>, std::map<int, std::int64_t>> bins;
  for (const auto& row : h.rows) {
    if (row[h.column("arithmetic")] != "fp64") continue;
    const std::string& bin = row[h.column("log2_abs_bin")];
    if (bin == "zero" || bin == "nonfinite") continue;
    bins[{std::stoll(row[h.column("step")]), row[h.column("tensor")]}][std::stoi(bin)] +=
        std::stoll(row[h.column("count")]);
  }
  for (const auto& [key, hist] : bins) {
    std::int64_t total = 0;
    for (const auto& [e, n] : hist) total += n;
    for (int k = 0; k <= 24; ++k) {
      std::int64_t under = 0, over = 0;
      for (const auto& [e, n] : hist) {
        if (e + k <= -26) under += n;
        if (e + k >= 16) over += n;
      }
      table.row(key.first, key.second, k, std::ldexp(1.0, k), total, double(under) / double(total),
                double(over) / double(total));
    }
  }
}

}  // namespace

StudyOutput run_underflow(const StudyOptions& options) {
  const StudyConfig& cfg = options.config;
  StudyOutput out;
  std::vector<ScaleRun> runs;
  if (!cfg.has("loss_scales") || !cfg.values().at("loss_scales").is_array())
    throw cfg.error("loss_scales", "must be an array of numbers and \"dynamic\"");
  for (const auto& s : cfg.values().at("loss_scales")) {
    ScaleRun r;
    nlohmann::json patch;
    if (s.is_number() && s.get<double>() > 0) {
      r.static_scale = s.get<double>();
      r.label = fmt::format("{}", r.static_scale);
      patch["loss_scaler"] = {{"policy", "static"}, {"init_scale", r.static_scale}};
    } else if (s == "dynamic") {
      r.label = "dynamic";
      if (!cfg.values().contains("dynamic_scaler")) throw cfg.error("dynamic_scaler", "is missing");
      patch["loss_scaler"] = cfg.values().at("dynamic_scaler");
    } else {
      throw cfg.error("loss_scales",
                      fmt::format("has {}: expected a positive number or \"dynamic\"", s.dump()));
    }
    r.run = run_training(training_config(cfg, patch), fmt::format("{}: loss scale {}", cfg.path(), r.label));
    runs.push_back(std::move(r));
  }

  auto& hist = out.table("histograms.csv",
                         {"loss_scale", "step", "layer", "tensor", "arithmetic", "log2_abs_bin", "count"});
  auto& per_step = out.table("underflow.csv", {"loss_scale", "static_scale", "step", "applied_scale", "layer",
                                               "tensor", "underflow_fraction", "nonfinite_fraction"});
  auto& summary = out.table(
      "summary.csv",
      {"loss_scale", "static_scale", "steps", "activation_grad_underflow_step0",
       "weight_grad_underflow_step0", "activation_grad_nonfinite_step0", "activation_grad_underflow_mean",
       "weight_grad_underflow_mean", "weight_grad_nonfinite_mean", "overflow_steps", "skipped_steps",
       "recovered_fraction_step0", "test_accuracy_percent", "fp64_test_accuracy_percent"});
  double baseline_underflow = NAN;
  for (const ScaleRun& r : runs) {
    const TextTable& h = r.run.histograms;
    // Activation-gradient overflow at step 0 from the histogram's nonfinite bin.
    std::int64_t act_total0 = 0, act_nonfinite0 = 0;
    for (const auto& row : h.rows) {
      hist.row(r.label, row[h.column("step")], row[h.column("layer")], row[h.column("tensor")],
               row[h.column("arithmetic")], row[h.column("log2_abs_bin")], row[h.column("count")]);
      if (row[h.column("step")] == "0" && row[h.column("tensor")] == "activation_grad" &&
          row[h.column("arithmetic")] == "emulated") {
        const auto count = std::stoll(row[h.column("count")]);
        act_total0 += count;
        if (row[h.column("log2_abs_bin")] == "nonfinite") act_nonfinite0 += count;
      }
    }
    // Measured where it happens: the fraction of gradient entries a rounding
    // to fp16 flushed to zero (steps.csv, see trainer.hpp), not a comparison
    // with the shadow, which would also count diverged ReLU masks.
    const TextTable& s = r.run.steps;
    const auto act = s.columns_ending("_activation_grad_underflow_fraction");
    const auto wu = s.columns_ending("_weight_grad_underflow_fraction");
    const auto wn = s.columns_ending("_weight_grad_nonfinite_fraction");
    std::vector<double> act_all, w_all, wn_all;
    double act0 = NAN, w0 = NAN;
    std::int64_t overflow_steps = 0;
    for (const auto& row : s.rows) {
      const auto value = [&](std::size_t c) { return row[c].empty() ? NAN : std::stod(row[c]); };
      double a_sum = 0, w_sum = 0, n_sum = 0;
      for (std::size_t i = 0; i < act.size(); ++i) {
        // Layer name = column name without the suffix.
        const std::string layer = s.columns[act[i]].substr(0, s.columns[act[i]].size() - 35);
        per_step.row(r.label, r.static_scale, row[0], row[s.column("loss_scale")], layer, "activation_grad",
                     value(act[i]), NAN);
        per_step.row(r.label, r.static_scale, row[0], row[s.column("loss_scale")], layer, "weight_grad",
                     value(wu[i]), value(wn[i]));
        a_sum += value(act[i]), w_sum += value(wu[i]), n_sum += value(wn[i]);
      }
      const double layers = double(act.size());
      act_all.push_back(a_sum / layers), w_all.push_back(w_sum / layers), wn_all.push_back(n_sum / layers);
      if (row[0] == "0") act0 = a_sum / layers, w0 = w_sum / layers;
      overflow_steps += row[s.column("overflow_found")] == "1";
    }
    if (r.static_scale == 1) baseline_underflow = act0;
    const double recovered = baseline_underflow > 0 ? (baseline_underflow - act0) / baseline_underflow : NAN;
    summary.row(r.label, r.static_scale, std::int64_t(s.rows.size()), act0, w0,
                act_total0 ? double(act_nonfinite0) / double(act_total0) : 0.0, mean(act_all), mean(w_all),
                mean(wn_all), overflow_steps, r.run.result.skipped_steps, recovered,
                r.run.final_accuracy_percent, r.run.shadow_accuracy_percent);
    out.findings.push_back(fmt::format(
        "scale {:>8}: activation grads lost to fp16 underflow at step 0 {:.2f}% (recovered {:.1f}%), "
        "weight grads {:.2f}%, overflow steps {}, test accuracy {:.2f}%",
        r.label, 100 * act0, 100 * recovered, 100 * w0, overflow_steps, r.run.final_accuracy_percent));
  }
  predicted_table(runs.front().run.histograms, out);
  describe_training(runs.front().run, out);
  out.meta["formats"] = {"binary16", "binary32", "binary64 (shadow)"};
  out.meta["seed"] = training_config(cfg).value("seed", 0);
  out.meta["policy"] = training_config(cfg).value("policy", nlohmann::json("?"));
  return out;
}

}  // namespace rpsim::sim::study
