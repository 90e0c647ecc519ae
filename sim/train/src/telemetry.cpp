// steps.csv and histograms.csv rows.
#include "telemetry.hpp"

#include "rpsim/train/step_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

namespace rpsim::sim::train {
namespace {

// Fraction of entries zero in `emulated` but nonzero (and finite) in
// `reference`: underflow and any other divergence (a ReLU mask that differs
// once the runs have drifted apart, say) together.
double zero_vs_fp64_fraction(const Matrix& emulated, const Matrix& reference) {
  if (emulated.size() == 0 || emulated.size() != reference.size()) return 0;
  return double(count_zero_vs(std::span<const double>(emulated.data(), std::size_t(emulated.size())),
                              std::span<const double>(reference.data(), std::size_t(reference.size())))) /
         double(emulated.size());
}

double nonfinite_fraction(const Matrix& m) {
  if (m.size() == 0) return 0;
  return double(count_nonfinite(std::span<const double>(m.data(), std::size_t(m.size())))) / double(m.size());
}

struct Histogram {
  std::map<int, std::int64_t> bins;
  std::int64_t zeros = 0, nonfinite = 0;
  void add(const Matrix& m, double unscale) {
    for (Eigen::Index i = 0; i < m.size(); ++i) {
      const double v = m.data()[i] * unscale;
      if (!std::isfinite(v))
        ++nonfinite;
      else if (v == 0)
        ++zeros;
      else
        ++bins[std::ilogb(v)];
    }
  }
};

void histogram_rows(std::string& csv, std::int64_t step, const std::string& layer, const char* tensor,
                    const char* arithmetic, const Histogram& h) {
  const std::string prefix = std::to_string(step) + "," + layer + "," + tensor + "," + arithmetic + ",";
  if (h.zeros) csv += prefix + "zero," + std::to_string(h.zeros) + "\n";
  if (h.nonfinite) csv += prefix + "nonfinite," + std::to_string(h.nonfinite) + "\n";
  for (const auto& [bin, count] : h.bins)
    csv += prefix + std::to_string(bin) + "," + std::to_string(count) + "\n";
}

// Every parameter of `layer` into one column (`out`, resized only when its
// size changes: the buffers live as long as the run).
void weights_of(Layer& layer, Matrix& out) {
  Eigen::Index n = 0;
  for (const Parameter* p : layer.parameters()) n += p->value.size();
  if (out.size() != n) out.resize(n, 1);
  double* at = out.data();
  for (const Parameter* p : layer.parameters())
    at = std::copy(p->value.data(), p->value.data() + p->value.size(), at);
}

// The histograms of one layer's gradients in one network.
void layer_histograms(std::string& csv, std::int64_t step, const std::string& name, const char* arithmetic,
                      const Network& net, std::size_t i, double unscale) {
  Histogram a, w;
  a.add(net.activation_grads[i].values, unscale);
  for (Parameter* p : net.model.layers[i]->parameters()) w.add(p->grad, 1.0);
  histogram_rows(csv, step, name, "activation_grad", arithmetic, a);
  histogram_rows(csv, step, name, "weight_grad", arithmetic, w);
}

// MX and NVFP4 have one scale per block: its range stands where the
// per-tensor scale does.
bool block_scaled(const PrecisionPolicy& p) {
  return block_scaled(p.fp8.scaling);
}

// The FP8 columns of one layer, tensor by tensor in the layer's order.
std::string fp8_columns(const Layer& layer, const PrecisionPolicy& policy) {
  std::string out;
  for (const auto& [tensor, stats] : layer.fp8_stats(policy)) {
    const std::string p = "," + layer.name() + "." + tensor + "_fp8_";
    out += p + "amax" + (block_scaled(policy) ? p + "scale_min" + p + "scale_max" : p + "scale") + p +
           "saturated_fraction" + p + "flushed_fraction";
  }
  return out;
}

std::string fp8_cells(const Layer& layer, const PrecisionPolicy& policy) {
  std::string out;
  // Appended cell by cell: GCC 12 warns (-Wrestrict) on "," + num(...).
  const auto cell = [&out](double v) {
    out += ',';
    out += num(v);
  };
  for (const auto& [tensor, s] : layer.fp8_stats(policy)) {
    const double n = double(s->entries);
    cell(s->amax);
    cell(s->scale_min);
    if (block_scaled(policy)) cell(s->scale_max);
    cell(n > 0 ? double(s->saturated) / n : 0);
    cell(n > 0 ? double(s->flushed) / n : 0);
  }
  return out;
}

}  // namespace

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

Telemetry::Telemetry(const Model& model, const PrecisionPolicy& policy,
                     const std::vector<std::int64_t>& histogram_steps, bool per_layer_scales)
    : policy_(policy),
      per_layer_scales_(per_layer_scales),
      histogram_steps_(histogram_steps.begin(), histogram_steps.end()) {
  for (std::size_t i = 0; i < model.layers.size(); ++i)
    if (!model.layers[i]->parameters().empty()) tracked_.push_back(i);
  steps_csv = "step,epoch,loss_emulated_nats,loss_fp64_nats,loss_scale,skipped,overflow_found,grad_norm";
  for (std::size_t i : tracked_) {
    const std::string& ln = model.layers[i]->name();
    steps_csv += "," + ln + "_weight_grad_underflow_fraction," + ln + "_weight_grad_nonfinite_fraction," +
                 ln + "_activation_grad_underflow_fraction," + ln + "_activation_grad_nonfinite_fraction," +
                 ln + "_weight_rel_distance_from_fp64," + ln + "_weight_grad_zero_vs_fp64_fraction," + ln +
                 "_activation_grad_zero_vs_fp64_fraction," + ln + "_weight_update_stalled_fraction";
  }
  // After every per-layer column, so that a run without FP8 keeps its columns
  // exactly and an FP8 run's first columns match them.
  for (std::size_t i : tracked_) steps_csv += fp8_columns(*model.layers[i], policy);
  // Last of all, so that every other column keeps its place under adaptive
  // loss scaling (Zhao et al. 2019), the only scaler with per-layer scales.
  if (per_layer_scales_)
    for (std::size_t i : tracked_) steps_csv += "," + model.layers[i]->name() + "_loss_scale";
  steps_csv += "\n";
}

void Telemetry::add_histograms(std::int64_t step, double scale, const Network& emu, const Network* shadow) {
  if (!histogram_steps_.count(step)) return;
  for (std::size_t i : tracked_) {
    const std::string& name = emu.model.layers[i]->name();
    layer_histograms(histograms_csv, step, name, "emulated", emu, i, 1.0 / scale);
    if (shadow) layer_histograms(histograms_csv, step, name, "fp64", *shadow, i, 1.0);
  }
}

// Underflow where it happens: gradient entries the roundings to their
// formats flushed to zero (counted by the ops, the unscale and the
// clipping). The entry-by-entry comparison with the shadow is kept apart:
// it also counts entries the diverged runs zero differently.
void Telemetry::measure_gradients(const Network& emu, const Network* shadow) {
  under_.clear();
  nonfinite_.clear();
  activation_under_.clear();
  activation_nonfinite_.clear();
  zero_vs_.clear();
  activation_zero_vs_.clear();
  for (std::size_t i : tracked_) {
    auto pe = emu.model.layers[i]->parameters();
    double u = 0, z = 0, nf = 0, cnt = 0;
    for (std::size_t k = 0; k < pe.size(); ++k) {
      const double sz = double(pe[k]->grad.size());
      u += double(pe[k]->grad_underflow);
      if (shadow)
        z += zero_vs_fp64_fraction(pe[k]->grad, shadow->model.layers[i]->parameters()[k]->grad) * sz;
      nf += nonfinite_fraction(pe[k]->grad) * sz;
      cnt += sz;
    }
    under_.push_back(cnt ? u / cnt : 0);
    zero_vs_.push_back(cnt ? z / cnt : 0);
    nonfinite_.push_back(cnt ? nf / cnt : 0);
    // The gradient arriving at the layer: entries flushed upstream (see
    // Tensor::flushed) or by this layer's cast of it (FP8: e5m2).
    const Tensor& g = emu.activation_grads[i];
    const Mask cast = emu.model.layers[i]->gradient_cast_flushed();
    double flushed = double(g.underflow_count());
    if (cast.size() == g.values.size() && cast.size())
      flushed = g.flushed.size() ? double((g.flushed || cast).count()) : double(cast.count());
    activation_under_.push_back(g.values.size() ? flushed / double(g.values.size()) : 0);
    activation_nonfinite_.push_back(nonfinite_fraction(g.values));
    activation_zero_vs_.push_back(shadow ? zero_vs_fp64_fraction(g.values, shadow->activation_grads[i].values)
                                         : 0);
  }
}

void Telemetry::add_row(const std::string& head, const Network& emu, const Network* shadow) {
  std::string row = head;
  for (std::size_t t = 0; t < tracked_.size(); ++t) {
    row += ',' + num(under_[t]) + ',' + num(nonfinite_[t]) + ',' + num(activation_under_[t]) + ',' +
           num(activation_nonfinite_[t]) + ',';
    if (shadow) {
      weights_of(*emu.model.layers[tracked_[t]], weights_emu_);
      weights_of(*shadow->model.layers[tracked_[t]], weights_shadow_);
      const Matrix &we = weights_emu_, &ws = weights_shadow_;
      const double denom = ws.norm();
      row += num(denom > 0 ? (we - ws).norm() / denom : (we - ws).norm());
    }
    row += ',';
    if (shadow) row += num(zero_vs_[t]);
    row += ',';
    if (shadow) row += num(activation_zero_vs_[t]);
    double stalled = 0, entries = 0;
    for (const Parameter* p : emu.model.layers[tracked_[t]]->parameters()) {
      stalled += double(p->update_stalled);
      entries += double(p->value.size());
    }
    row += ',' + num(entries ? stalled / entries : 0);
  }
  for (std::size_t i : tracked_) row += fp8_cells(*emu.model.layers[i], policy_);
  if (per_layer_scales_)
    for (std::size_t i : tracked_) row += ',' + num(emu.grad_scales[i]);
  steps_csv += row + "\n";
}

}  // namespace rpsim::sim::train
