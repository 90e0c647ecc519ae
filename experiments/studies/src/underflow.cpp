// Study 3, `underflow`: how many fp16 gradients vanish, and how many does
// each loss scale bring back? Micikevicius et al., "Mixed Precision
// Training", ICLR 2018, Sec. 3.2 and Fig. 3: the histogram of SSD's
// activation gradients (67% of them exactly zero, many non-zero ones below
// fp16's smallest subnormal) and a loss scale of 8 that was enough for SSD.
// The loss-scale runs here (one per static scale, one dynamic) measure the
// underflow where it happens; the Fig. 3 part (underflow_fig3.cpp) draws the
// histograms for the MLP and the CNN. (A real gradient dump, such as
// ../shared/grads-h100, waits for the .npz reader in sim/io.)
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "rpsim/study/training_runs.hpp"
#include "underflow_fig3.hpp"

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
// fraction that a scale S would flush to zero in fp16 or push past the
// largest finite, binade by binade (binned_cast).
void predicted_table(const TextTable& h, StudyOutput& out) {
  auto& table = out.table("predicted.csv", {"step", "tensor", "log2_scale", "scale", "fp64_nonzero_count",
                                            "underflow_fraction", "overflow_fraction"});
  std::map<std::pair<std::int64_t, std::string>, Log2Histogram> bins;
  for (const auto& row : h.rows) {
    if (row[h.column("arithmetic")] != "fp64") continue;
    const std::string& bin = row[h.column("log2_abs_bin")];
    if (bin == "zero" || bin == "nonfinite") continue;
    bins[{std::stoll(row[h.column("step")]), row[h.column("tensor")]}].bins[std::stoi(bin)] +=
        std::stoll(row[h.column("count")]);
  }
  for (const auto& [key, hist] : bins) {
    const double total = double(hist.nonzero());
    for (int k = 0; k <= 24; ++k) {
      const BinnedCast c = binned_cast(hist, formats::binary16(), k);
      table.row(key.first, key.second, k, std::ldexp(1.0, k), hist.nonzero(), double(c.underflow) / total,
                double(c.overflow) / total);
    }
  }
}

std::vector<ScaleRun> scale_runs(const StudyConfig& cfg) {
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
  return runs;
}

// Step 0's activation gradients from the emulated histogram: entries per
// layer (to weight the per-layer fractions) and the non-finite ones.
struct StepZero {
  std::map<std::string, std::int64_t> entries;
  std::int64_t total = 0, nonfinite = 0;
};

StepZero copy_histograms(const ScaleRun& r, CsvTable& hist) {
  const TextTable& h = r.run.histograms;
  StepZero z;
  for (const auto& row : h.rows) {
    hist.row(r.label, row[h.column("step")], row[h.column("layer")], row[h.column("tensor")],
             row[h.column("arithmetic")], row[h.column("log2_abs_bin")], row[h.column("count")]);
    if (row[h.column("step")] == "0" && row[h.column("tensor")] == "activation_grad" &&
        row[h.column("arithmetic")] == "emulated") {
      const auto count = std::stoll(row[h.column("count")]);
      z.entries[row[h.column("layer")]] += count;
      z.total += count;
      if (row[h.column("log2_abs_bin")] == "nonfinite") z.nonfinite += count;
    }
  }
  return z;
}

// One run's means over steps; the step-0 activation figure both as the mean
// of the per-layer fractions and weighted by each layer's entries.
struct RunUnderflow {
  std::vector<double> act_all, act_weighted_all, w_all, wn_all;
  double act0 = NAN, act0_weighted = NAN, w0 = NAN;
  std::int64_t overflow_steps = 0;
};

RunUnderflow per_step_rows(const ScaleRun& r, const StepZero& z, CsvTable& per_step) {
  // Measured where it happens: the fraction of gradient entries a rounding
  // to fp16 flushed to zero (steps.csv, see trainer.hpp), not a comparison
  // with the shadow, which would also count diverged ReLU masks.
  const TextTable& s = r.run.steps;
  const auto act = s.columns_ending("_activation_grad_underflow_fraction");
  const auto an = s.columns_ending("_activation_grad_nonfinite_fraction");
  const auto wu = s.columns_ending("_weight_grad_underflow_fraction");
  const auto wn = s.columns_ending("_weight_grad_nonfinite_fraction");
  RunUnderflow u;
  for (const auto& row : s.rows) {
    const auto value = [&](std::size_t c) { return row[c].empty() ? NAN : std::stod(row[c]); };
    double a_sum = 0, w_sum = 0, n_sum = 0, a_weighted = 0;
    for (std::size_t i = 0; i < act.size(); ++i) {
      // Layer name = column name without the suffix.
      const std::string layer = s.columns[act[i]].substr(0, s.columns[act[i]].size() - 35);
      per_step.row(r.label, r.static_scale, row[0], row[s.column("loss_scale")], layer, "activation_grad",
                   value(act[i]), value(an[i]));
      per_step.row(r.label, r.static_scale, row[0], row[s.column("loss_scale")], layer, "weight_grad",
                   value(wu[i]), value(wn[i]));
      a_sum += value(act[i]), w_sum += value(wu[i]), n_sum += value(wn[i]);
      const auto e = z.entries.find(layer);
      a_weighted += value(act[i]) * double(e == z.entries.end() ? 0 : e->second);
    }
    const double layers = double(act.size());
    u.act_all.push_back(a_sum / layers), u.w_all.push_back(w_sum / layers),
        u.wn_all.push_back(n_sum / layers);
    // Every step's batch has step 0's entries per layer (the last one of an
    // epoch may be smaller: weighted the same).
    u.act_weighted_all.push_back(z.total > 0 ? a_weighted / double(z.total) : NAN);
    if (row[0] == "0")
      u.act0 = a_sum / layers, u.w0 = w_sum / layers, u.act0_weighted = u.act_weighted_all.back();
    u.overflow_steps += row[s.column("overflow_found")] == "1";
  }
  return u;
}

// "0.5%", "0.0012%", "0" (a fixed 2 decimals showed 0.00% for a few entries).
std::string percent(double fraction) {
  return fraction == 0 ? std::string("0") : fmt::format("{:.3g}%", 100 * fraction);
}

void scale_tables(const std::vector<ScaleRun>& runs, StudyOutput& out) {
  auto& hist = out.table("histograms.csv",
                         {"loss_scale", "step", "layer", "tensor", "arithmetic", "log2_abs_bin", "count"});
  auto& per_step = out.table("underflow.csv", {"loss_scale", "static_scale", "step", "applied_scale", "layer",
                                               "tensor", "underflow_fraction", "nonfinite_fraction"});
  auto& summary = out.table(
      "summary.csv",
      {"loss_scale", "static_scale", "steps", "activation_grad_underflow_step0",
       "activation_grad_underflow_step0_weighted", "weight_grad_underflow_step0",
       "activation_grad_nonfinite_step0", "activation_grad_underflow_mean", "weight_grad_underflow_mean",
       "weight_grad_nonfinite_mean", "activation_grad_underflow_mean_weighted", "overflow_steps",
       "skipped_steps", "recovered_fraction_step0", "test_accuracy_percent", "fp64_test_accuracy_percent"});
  double baseline = NAN;
  for (const ScaleRun& r : runs) {
    const StepZero z = copy_histograms(r, hist);
    const RunUnderflow u = per_step_rows(r, z, per_step);
    if (r.static_scale == 1) baseline = u.act0;
    // Nothing flushed at scale 1: nothing to recover (not "100%").
    const double recovered = baseline > 0 ? (baseline - u.act0) / baseline : NAN;
    summary.row(r.label, r.static_scale, std::int64_t(r.run.steps.rows.size()), u.act0, u.act0_weighted, u.w0,
                z.total ? double(z.nonfinite) / double(z.total) : 0.0, mean(u.act_all), mean(u.w_all),
                mean(u.wn_all), mean(u.act_weighted_all), u.overflow_steps, r.run.result.skipped_steps,
                recovered, r.run.final_accuracy_percent, r.run.shadow_accuracy_percent);
    out.findings.push_back(fmt::format(
        "scale {:>8}: activation grads flushed to zero by fp16 at step 0: {} mean of per-layer fractions, {} "
        "of "
        "all entries ({}), weight grads {}, overflow steps {}, test accuracy {:.2f}%",
        r.label, percent(u.act0), percent(u.act0_weighted),
        std::isnan(recovered) ? std::string(baseline == 0 ? "none at scale 1 to recover" : "no scale-1 run")
                              : fmt::format("recovered {:.1f}% of scale 1's", 100 * recovered),
        percent(u.w0), u.overflow_steps, r.run.final_accuracy_percent));
  }
}

}  // namespace

StudyOutput run_underflow(const StudyOptions& options) {
  const StudyConfig& cfg = options.config;
  StudyOutput out;
  const std::vector<ScaleRun> runs = scale_runs(cfg);
  scale_tables(runs, out);
  predicted_table(runs.front().run.histograms, out);
  fig3_tables(cfg, runs.front().run, out);
  describe_training(runs.front().run, out);
  out.meta["formats"] = {"binary16", "binary32", "binary64 (shadow)"};
  out.meta["seed"] = training_config(cfg).value("seed", 0);
  out.meta["policy"] = training_config(cfg).value("policy", nlohmann::json("?"));
  return out;
}

}  // namespace rpsim::sim::study
