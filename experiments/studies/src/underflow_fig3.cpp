// Study 3, Fig. 3 of Micikevicius et al., "Mixed Precision Training", ICLR
// 2018: the histogram of SSD's activation gradients (fp32 training) by
// binade with a separate zero bin, log y, the fp16 subnormal and normal
// ranges marked. Their caption: 67% of the values are zero; their text: the
// values below fp16's range become zeros, and a loss scale of 8 was enough
// for SSD (values below 2^-27 did not matter, [2^-27, 2^-24) did).
#include "underflow_fig3.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "rpsim/io/npy.hpp"

namespace rpsim::sim::study {

std::int64_t Log2Histogram::nonzero() const {
  std::int64_t n = 0;
  for (const auto& [e, c] : bins) n += c;
  return n;
}

void Log2Histogram::add(const Log2Histogram& other) {
  for (const auto& [e, c] : other.bins) bins[e] += c;
  zeros += other.zeros;
  nonfinite += other.nonfinite;
}

BinnedCast binned_cast(const Log2Histogram& h, const Format& fmt, int log2_scale) {
  const int smallest = fmt.emin - fmt.man_bits;  // exponent of the smallest subnormal
  BinnedCast c;
  for (const auto& [e, n] : h.bins) {
    const int s = e + log2_scale;
    if (s + 1 <= smallest - 1)
      c.underflow += n;  // the whole binade is at most half the smallest subnormal
    else if (s < fmt.emin && fmt.subnormals)
      c.subnormal += n;
    else if (s > fmt.emax)
      c.overflow += n;
  }
  return c;
}

std::map<std::string, Log2Histogram> shadow_activation_histograms(const TextTable& h, std::int64_t step) {
  std::map<std::string, Log2Histogram> out;
  const std::size_t c_step = h.column("step"), c_layer = h.column("layer"), c_tensor = h.column("tensor"),
                    c_arith = h.column("arithmetic"), c_bin = h.column("log2_abs_bin"),
                    c_count = h.column("count");
  for (const auto& row : h.rows) {
    if (row[c_arith] != "fp64" || row[c_tensor] != "activation_grad" || std::stoll(row[c_step]) != step)
      continue;
    Log2Histogram& l = out[row[c_layer]];
    const std::int64_t n = std::stoll(row[c_count]);
    if (row[c_bin] == "zero")
      l.zeros += n;
    else if (row[c_bin] == "nonfinite")
      l.nonfinite += n;
    else
      l.bins[std::stoi(row[c_bin])] += n;
  }
  return out;
}

namespace {

struct Fig3Tables {
  CsvTable& histogram;
  CsvTable& summary;
};

// The scales 2^k, k = 0..40, at which nothing overflows, and among them
// those with the fewest underflows: [lo, hi], or none.
struct BinnedRange {
  int lo = -1, hi = -1;
  std::int64_t underflow = -1;
};
BinnedRange recovering_range(const Log2Histogram& h, const Format& fp16) {
  BinnedRange r;
  for (int k = 0; k <= 40; ++k) {
    const BinnedCast c = binned_cast(h, fp16, k);
    if (c.overflow > 0) continue;
    if (r.underflow < 0 || c.underflow < r.underflow)
      r = {k, k, c.underflow};
    else if (c.underflow == r.underflow && r.hi == k - 1)
      r.hi = k;
  }
  return r;
}

void emit(Fig3Tables& t, const std::string& source, std::int64_t step, const std::string& layer,
          const Log2Histogram& h) {
  const double entries = double(h.entries());
  if (entries == 0) return;
  t.histogram.row(source, step, layer, "zero", h.zeros, double(h.zeros) / entries);
  if (h.nonfinite)
    t.histogram.row(source, step, layer, "nonfinite", h.nonfinite, double(h.nonfinite) / entries);
  for (const auto& [e, n] : h.bins)
    t.histogram.row(source, step, layer, std::to_string(e), n, double(n) / entries);
  const Format& fp16 = formats::binary16();
  const BinnedCast at1 = binned_cast(h, fp16, 0);
  const BinnedRange r = recovering_range(h, fp16);
  const double nonzero = double(h.nonzero());
  auto frac = [&](std::int64_t n) { return nonzero > 0 ? double(n) / nonzero : 0.0; };
  t.summary.row(source, step, layer, h.entries(), double(h.zeros) / entries, double(at1.underflow) / entries,
                frac(at1.underflow), frac(at1.subnormal), r.lo, r.hi, frac(r.underflow));
}

// Every layer of one source and the whole network ("all").
void emit_source(Fig3Tables& t, const std::string& source, std::int64_t step,
                 const std::map<std::string, Log2Histogram>& layers, std::vector<std::string>& findings) {
  Log2Histogram all;
  for (const auto& [layer, h] : layers) {
    emit(t, source, step, layer, h);
    all.add(h);
  }
  emit(t, source, step, "all", all);
  const BinnedCast c = binned_cast(all, formats::binary16(), 0);
  const BinnedRange r = recovering_range(all, formats::binary16());
  const double entries = double(std::max<std::int64_t>(1, all.entries()));
  findings.push_back(fmt::format(
      "Fig. 3 {:>14} step {:>4}: {:5.1f}% of activation gradients exactly zero (the paper's SSD: 67%), "
      "{:6.3f}% non-zero but zero in fp16, {:5.1f}% fp16 subnormal; scales 2^{}..2^{} lose the fewest "
      "without overflow",
      source, step, 100 * double(all.zeros) / entries, 100 * double(c.underflow) / entries,
      100 * double(c.subnormal) / entries, r.lo, r.hi));
}

std::int64_t last_histogram_step(const TextTable& h) {
  std::int64_t last = -1;
  for (const auto& row : h.rows) last = std::max<std::int64_t>(last, std::stoll(row[h.column("step")]));
  return last;
}

// The act_grad/<module> arrays of a gradient dump (experiments/python/
// dump_grads.py, e.g. ../shared/grads-h100), one histogram per module; none
// when the file is absent (a finding says so), an error naming it when it is
// not an array file.
std::map<std::string, Log2Histogram> dump_histograms(const std::string& path,
                                                     std::vector<std::string>& findings) {
  std::map<std::string, Log2Histogram> layers;
  if (!std::filesystem::exists(path)) {
    findings.push_back(fmt::format("Fig. 3: gradient dump {} is absent: skipped", path));
    return layers;
  }
  for (const io::NumericArray& a : io::read_array_file(path)) {
    if (a.name.rfind("act_grad/", 0) != 0) continue;
    Log2Histogram& h = layers[a.name.substr(9)];
    for (double v : a.values) {
      if (!std::isfinite(v))
        ++h.nonfinite;
      else if (v == 0)
        ++h.zeros;
      else
        ++h.bins[std::ilogb(v)];
    }
  }
  return layers;
}

}  // namespace

void fig3_tables(const StudyConfig& cfg, const TrainingRun& mlp, StudyOutput& out) {
  Fig3Tables t{out.table("fig3_histogram.csv",
                         {"source", "step", "layer", "log2_abs_bin", "count", "fraction_of_entries"}),
               out.table("fig3_summary.csv",
                         {"source", "step", "layer", "entries", "exact_zero_fraction", "fp16_zero_fraction",
                          "fp16_zero_fraction_of_nonzero", "fp16_subnormal_fraction_of_nonzero",
                          "recovering_min_log2_scale", "recovering_max_log2_scale",
                          "underflow_fraction_of_nonzero_at_recovering_scales"})};
  const nlohmann::json fig3 = cfg.values().value("fig3", nlohmann::json::object());
  if (!fig3.is_object()) throw cfg.error("fig3", "must be an object {\"networks\": [...]}");
  const std::int64_t step = last_histogram_step(mlp.histograms);
  emit_source(t, "mlp", step, shadow_activation_histograms(mlp.histograms, step), out.findings);
  const nlohmann::json networks = fig3.value("networks", nlohmann::json::array());
  std::size_t index = 0;
  for (const auto& n : networks) {
    const std::string where = fmt::format("fig3.networks[{}]", index++);
    if (!n.is_object() || !n.contains("label") || !n.at("label").is_string() || !n.contains("set") ||
        !n.at("set").is_object())
      throw cfg.error(where, "must be {\"label\": STRING, \"set\": {training config fields}}");
    const TrainingRun run =
        run_training(training_config(cfg, n.at("set")), fmt::format("{}: {}", cfg.path(), where));
    const std::int64_t s = last_histogram_step(run.histograms);
    emit_source(t, n.at("label").get<std::string>(), s, shadow_activation_histograms(run.histograms, s),
                out.findings);
  }
  // A real network's gradients beside ours: the dump's label and path.
  if (fig3.contains("dump")) {
    const nlohmann::json& d = fig3.at("dump");
    if (!d.is_object() || !d.contains("label") || !d.at("label").is_string() || !d.contains("path") ||
        !d.at("path").is_string())
      throw cfg.error("fig3.dump", "must be {\"label\": STRING, \"path\": FILE.npz}");
    const auto layers = dump_histograms(d.at("path").get<std::string>(), out.findings);
    if (!layers.empty()) emit_source(t, d.at("label").get<std::string>(), 0, layers, out.findings);
  }
}

}  // namespace rpsim::sim::study
