// The training loop: emulated network and FP64 shadow in lockstep,
// telemetry rows, histograms, evaluation and the result files.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "rpsim/formats/random.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/io/run_info.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/trainer.hpp"

namespace rpsim::sim::train {
namespace {

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void init_uniform(Matrix& m, double bound, std::uint64_t seed, std::uint64_t stream, const Format& fmt) {
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double u = double(counter_random(seed, stream, std::uint64_t(i)) >> 11) * 0x1.0p-53;
    m.data()[i] = (2 * u - 1) * bound;
  }
  round_in_place(fmt, m);
}

struct Network {
  Model model;
  const PrecisionPolicy* policy;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<Tensor> activation_grads;  // dY arriving at each layer, last step
  double last_loss = 0;
};

// Forward and backward of one batch; leaves parameter gradients scaled by `scale`.
double forward_backward(Network& net, const Matrix& x, const std::vector<int>& labels, double scale,
                        const StepContext& ctx) {
  Tensor t{rounded(*net.policy->data, x), net.policy->data};
  for (auto& layer : net.model.layers) t = layer->forward(t, ctx);
  const double loss = net.model.loss->forward(t, labels, ctx);
  Tensor dy = net.model.loss->backward(scale, ctx);
  net.activation_grads.assign(net.model.layers.size(), Tensor{});
  for (std::size_t i = net.model.layers.size(); i-- > 0;) {
    net.activation_grads[i] = dy;
    dy = net.model.layers[i]->backward(dy, ctx, i > 0);
  }
  return loss;
}

std::vector<int> predict(Model& model, const PrecisionPolicy& policy, const Matrix& x,
                         const StepContext& ctx) {
  Tensor t{rounded(*policy.data, x), policy.data};
  for (auto& layer : model.layers) t = layer->forward(t, ctx);
  std::vector<int> out(std::size_t(t.values.rows()));
  for (Eigen::Index i = 0; i < t.values.rows(); ++i) {
    Eigen::Index best = 0;
    for (Eigen::Index j = 1; j < t.values.cols(); ++j)
      if (t.values(i, j) > t.values(i, best)) best = j;
    out[std::size_t(i)] = int(best);
  }
  return out;
}

double accuracy(Model& model, const PrecisionPolicy& policy, const Dataset& test, std::size_t batch,
                const StepContext& ctx) {
  std::size_t correct = 0;
  std::vector<std::size_t> idx;
  for (std::size_t start = 0; start < test.size(); start += batch) {
    idx.clear();
    for (std::size_t i = start; i < std::min(test.size(), start + batch); ++i) idx.push_back(i);
    const auto pred = predict(model, policy, test.batch(idx), ctx);
    for (std::size_t k = 0; k < idx.size(); ++k) correct += pred[k] == test.labels[idx[k]];
  }
  return test.size() ? 100.0 * double(correct) / double(test.size()) : 0.0;
}

// Fraction of entries zero in `emulated` but nonzero (and finite) in
// `reference`: underflow and any other divergence (a ReLU mask that differs
// once the runs have drifted apart, say) together.
double zero_vs_fp64_fraction(const Matrix& emulated, const Matrix& reference) {
  if (emulated.size() == 0 || emulated.size() != reference.size()) return 0;
  Eigen::Index n = 0;
  for (Eigen::Index i = 0; i < emulated.size(); ++i)
    n += emulated.data()[i] == 0 && reference.data()[i] != 0 && std::isfinite(reference.data()[i]);
  return double(n) / double(emulated.size());
}

double nonfinite_fraction(const Matrix& m) {
  if (m.size() == 0) return 0;
  Eigen::Index n = 0;
  for (Eigen::Index i = 0; i < m.size(); ++i) n += !std::isfinite(m.data()[i]);
  return double(n) / double(m.size());
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

Matrix weights_of(Layer& layer) {
  std::vector<double> all;
  for (Parameter* p : layer.parameters())
    all.insert(all.end(), p->value.data(), p->value.data() + p->value.size());
  return Eigen::Map<Matrix>(all.data(), Eigen::Index(all.size()), 1);
}

}  // namespace

std::vector<Parameter*> Model::parameters() {
  std::vector<Parameter*> out;
  for (auto& l : layers)
    for (Parameter* p : l->parameters()) out.push_back(p);
  return out;
}

Model Model::clone() const {
  Model m;
  for (const auto& l : layers) m.layers.push_back(l->clone());
  m.loss = loss->clone();
  return m;
}

Model build_model(const Config& config, const Dataset& data) {
  Model m;
  const ModelConfig& mc = config.model;
  auto activation = [&](const std::string& name) -> std::unique_ptr<Layer> {
    if (mc.activation == "gelu") return std::make_unique<GELU>(name);
    return std::make_unique<ReLU>(name);
  };
  Eigen::Index width = data.features();
  if (mc.type == "cnn") {
    int c = data.channels, h = data.height, w = data.width;
    for (std::size_t i = 0; i < mc.channels.size(); ++i) {
      const std::string n = std::to_string(i);
      m.layers.push_back(std::make_unique<Conv2d>("conv" + n, c, mc.channels[i], h, w, 3, 1));
      m.layers.push_back(activation("act_conv" + n));
      m.layers.push_back(std::make_unique<MaxPool2d>("pool" + n, mc.channels[i], h, w, 2));
      c = mc.channels[i];
      h /= 2;
      w /= 2;
      if (h < 1 || w < 1)
        throw ConfigError("model.channels: too many pooling stages for " + std::to_string(data.height) + "x" +
                          std::to_string(data.width) + " images");
    }
    width = Eigen::Index(c) * h * w;
  }
  const std::vector<int> hidden = mc.type == "mlp" ? mc.hidden : std::vector<int>{};
  for (std::size_t i = 0; i < hidden.size(); ++i) {
    const std::string n = std::to_string(i);
    m.layers.push_back(std::make_unique<Linear>("fc" + n, width, hidden[i]));
    if (mc.layer_norm) m.layers.push_back(std::make_unique<LayerNorm>("ln" + n, hidden[i]));
    m.layers.push_back(activation("act" + n));
    width = hidden[i];
  }
  m.layers.push_back(std::make_unique<Linear>("fc" + std::to_string(hidden.size()), width, data.classes));
  if (config.loss == "mse_loss")
    m.loss = std::make_unique<MSELoss>();
  else
    m.loss = std::make_unique<CrossEntropyLoss>();
  // torch.nn.Linear / Conv2d default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
  std::uint64_t stream = 1;
  for (auto& l : m.layers) {
    if (auto* lin = dynamic_cast<Linear*>(l.get())) {
      const double bound = 1.0 / std::sqrt(double(lin->weight.value.rows()));
      init_uniform(lin->weight.value, bound, config.seed, stream++, config.policy.parameter_storage());
      init_uniform(lin->bias.value, bound, config.seed, stream++, config.policy.parameter_storage());
    }
  }
  return m;
}

RunResult run(const Config& config, const RunOptions& options) {
  if (options.threads > 0) omp_set_num_threads(options.threads);
  const auto wall_start = std::chrono::steady_clock::now();
  RunResult result;
  if (!options.out_dir.empty()) io::ensure_writable_dir(options.out_dir);
  const DataSplit data = load_data(config.data);
  result.synthetic_data = data.synthetic;
  result.data_description = data.description;
  if (options.progress && data.synthetic)
    std::fprintf(options.progress, "WARNING: %s\n", data.description.c_str());
  if (data.train.size() == 0) throw ConfigError("data: the training set is empty");

  const PrecisionPolicy& policy = config.policy;
  static const PrecisionPolicy fp64 = named_policy("fp64");
  Network emu{build_model(config, data.train), &policy, nullptr, {}, 0};
  emu.optimizer = std::make_unique<Optimizer>(config.optimizer, policy, config.seed);
  Network shadow{emu.model.clone(), &fp64, nullptr, {}, 0};
  shadow.optimizer = std::make_unique<Optimizer>(config.optimizer, fp64, config.seed);
  auto scaler = make_loss_scaler(config.loss_scaler);

  const std::size_t n = data.train.size();
  const std::size_t per_epoch = (n + config.batch_size - 1) / config.batch_size;
  const std::int64_t total_steps = config.steps > 0 ? config.steps : std::int64_t(per_epoch) * config.epochs;
  const std::set<std::int64_t> hist_steps(config.histogram_steps.begin(), config.histogram_steps.end());
  const std::set<std::int64_t> inject(config.inject_overflow_steps.begin(),
                                      config.inject_overflow_steps.end());

  // Parametric layers: the telemetry columns.
  std::vector<std::size_t> tracked;
  for (std::size_t i = 0; i < emu.model.layers.size(); ++i)
    if (!emu.model.layers[i]->parameters().empty()) tracked.push_back(i);
  std::string steps_csv =
      "step,epoch,loss_emulated_nats,loss_fp64_nats,loss_scale,skipped,overflow_found,grad_norm";
  for (std::size_t i : tracked) {
    const std::string& ln = emu.model.layers[i]->name();
    steps_csv += "," + ln + "_weight_grad_underflow_fraction," + ln + "_weight_grad_nonfinite_fraction," +
                 ln + "_activation_grad_underflow_fraction," + ln + "_weight_rel_distance_from_fp64," + ln +
                 "_weight_grad_zero_vs_fp64_fraction," + ln + "_activation_grad_zero_vs_fp64_fraction";
  }
  steps_csv += "\n";
  std::string hist_csv = "step,layer,tensor,arithmetic,log2_abs_bin,count\n";

  auto evaluate = [&](std::int64_t step, int epoch) {
    if (!config.evaluate || data.test.size() == 0) return;
    Evaluation e;
    e.step = step;
    e.epoch = epoch;
    StepContext ctx{&policy, config.seed, std::uint64_t(step)};
    e.test_accuracy_percent = accuracy(emu.model, policy, data.test, config.eval_batch_size, ctx);
    if (config.shadow) {
      StepContext sctx{&fp64, config.seed, std::uint64_t(step)};
      e.shadow_test_accuracy_percent = accuracy(shadow.model, fp64, data.test, config.eval_batch_size, sctx);
    }
    result.evaluations.push_back(e);
    if (options.progress) {
      std::fprintf(options.progress, "%sstep %lld epoch %d: test accuracy %.2f%%",
                   options.progress_is_terminal ? "\n" : "", (long long)step, epoch, e.test_accuracy_percent);
      if (config.shadow)
        std::fprintf(options.progress, " (fp64 shadow %.2f%%)", e.shadow_test_accuracy_percent);
      std::fprintf(options.progress, "\n");
    }
  };

  std::int64_t step = 0;
  int epoch = 0;
  std::vector<std::size_t> order;
  std::uint64_t activation_bytes = 0;
  const auto loop_start = std::chrono::steady_clock::now();
  while (step < total_steps) {
    order = epoch_order(n, config.seed, std::uint64_t(epoch));
    for (std::size_t b = 0; b < per_epoch && step < total_steps; ++b) {
      if (io::interrupted().load()) {
        result.interrupted = true;
        result.steps_done = step;
        if (options.progress)
          std::fprintf(options.progress, "\ninterrupted at step %lld (epoch %d); no results written\n",
                       (long long)step, epoch);
        return result;
      }
      const std::vector<std::size_t> idx(order.begin() + long(b * config.batch_size),
                                         order.begin() + long(std::min(n, (b + 1) * config.batch_size)));
      const Matrix x = data.train.batch(idx);
      std::vector<int> labels;
      for (std::size_t i : idx) labels.push_back(data.train.labels[i]);

      // Emulated step: scaled backward, unscale_, inf/NaN check, clip, step.
      const StepContext ctx{&policy, config.seed, std::uint64_t(step)};
      const double scale = scaler->scale();
      const double loss = forward_backward(emu, x, labels, scale, ctx);
      auto params = emu.model.parameters();
      if (inject.count(step) && !params.empty()) params.front()->grad(0, 0) = INFINITY;
      bool found = false;
      const double inv = round_value(formats::binary32(), 1.0 / scale);
      for (Parameter* p : params) {
        if (inv != 1.0) {
          const Matrix before = p->grad;
          p->grad *= inv;
          round_in_place(*policy.gradients, p->grad);
          p->grad_underflow += count_flushed(before, p->grad);
        }
        found = found || !p->grad.allFinite();
      }
      double grad_norm = NAN;
      if (!found) grad_norm = clip_grad_norm(params, config.max_grad_norm, policy);
      const bool skipped = scaler->update(found);
      result.skipped_steps += skipped;

      // Shadow step on the same batch, every op in binary64.
      double shadow_loss = NAN;
      std::vector<Parameter*> sparams;
      if (config.shadow) {
        const StepContext sctx{&fp64, config.seed, std::uint64_t(step)};
        shadow_loss = forward_backward(shadow, x, labels, 1.0, sctx);
        sparams = shadow.model.parameters();
        clip_grad_norm(sparams, config.max_grad_norm, fp64);
      }

      // Telemetry (gradients before the update; weights after it).
      std::string row = std::to_string(step) + "," + std::to_string(epoch) + "," + num(loss) + "," +
                        (config.shadow ? num(shadow_loss) : "") + "," + num(scale) + "," +
                        (skipped ? "1" : "0") + "," + (found ? "1" : "0") + "," + num(grad_norm);
      if (hist_steps.count(step))
        for (std::size_t i : tracked) {
          Layer& le = *emu.model.layers[i];
          Histogram ae, we;
          ae.add(emu.activation_grads[i].values, 1.0 / scale);
          for (Parameter* p : le.parameters()) we.add(p->grad, 1.0);
          histogram_rows(hist_csv, step, le.name(), "activation_grad", "emulated", ae);
          histogram_rows(hist_csv, step, le.name(), "weight_grad", "emulated", we);
          if (config.shadow) {
            Layer& ls = *shadow.model.layers[i];
            Histogram as, ws;
            as.add(shadow.activation_grads[i].values, 1.0);
            for (Parameter* p : ls.parameters()) ws.add(p->grad, 1.0);
            histogram_rows(hist_csv, step, le.name(), "activation_grad", "fp64", as);
            histogram_rows(hist_csv, step, le.name(), "weight_grad", "fp64", ws);
          }
        }
      // Underflow where it happens: gradient entries the roundings to their
      // formats flushed to zero (counted by the ops, the unscale and the
      // clipping). The entry-by-entry comparison with the shadow is kept
      // apart: it also counts entries the diverged runs zero differently.
      std::vector<double> under, nonfin, act_under, zero_vs, act_zero_vs;
      for (std::size_t i : tracked) {
        auto pe = emu.model.layers[i]->parameters();
        double u = 0, z = 0, nf = 0, cnt = 0;
        for (std::size_t k = 0; k < pe.size(); ++k) {
          const double sz = double(pe[k]->grad.size());
          u += double(pe[k]->grad_underflow);
          if (config.shadow)
            z += zero_vs_fp64_fraction(pe[k]->grad, shadow.model.layers[i]->parameters()[k]->grad) * sz;
          nf += nonfinite_fraction(pe[k]->grad) * sz;
          cnt += sz;
        }
        under.push_back(cnt ? u / cnt : 0);
        zero_vs.push_back(cnt ? z / cnt : 0);
        nonfin.push_back(cnt ? nf / cnt : 0);
        // The gradient arriving at the layer: entries flushed upstream (see
        // Tensor::flushed) or by this layer's cast of it (FP8: e5m2).
        const Tensor& g = emu.activation_grads[i];
        const Mask cast = emu.model.layers[i]->gradient_cast_flushed();
        double flushed = double(g.underflow_count());
        if (cast.size() == g.values.size() && cast.size())
          flushed = g.flushed.size() ? double((g.flushed || cast).count()) : double(cast.count());
        act_under.push_back(g.values.size() ? flushed / double(g.values.size()) : 0);
        act_zero_vs.push_back(
            config.shadow ? zero_vs_fp64_fraction(g.values, shadow.activation_grads[i].values) : 0);
      }
      if (!skipped) emu.optimizer->step(params);
      if (config.shadow) shadow.optimizer->step(sparams);
      for (std::size_t t = 0; t < tracked.size(); ++t) {
        row += ',';
        row += num(under[t]);
        row += ',';
        row += num(nonfin[t]);
        row += ',';
        row += num(act_under[t]);
        row += ',';
        if (config.shadow) {
          const Matrix we = weights_of(*emu.model.layers[tracked[t]]);
          const Matrix ws = weights_of(*shadow.model.layers[tracked[t]]);
          const double denom = ws.norm();
          row += num(denom > 0 ? (we - ws).norm() / denom : (we - ws).norm());
        }
        row += ',';
        if (config.shadow) row += num(zero_vs[t]);
        row += ',';
        if (config.shadow) row += num(act_zero_vs[t]);
      }
      steps_csv += row + "\n";
      result.final_loss = loss;
      if (step == 0) {
        for (auto& l : emu.model.layers)
          for (const auto& [elements, fmt] : l->saved())
            if (fmt) activation_bytes += tensor_bytes(std::uint64_t(elements), *fmt);
      }
      ++step;
      if (options.progress) {
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
        const double rate = secs > 0 ? double(step) / secs : 0;
        const double eta = rate > 0 ? double(total_steps - step) / rate : 0;
        if (options.progress_is_terminal) {
          std::fprintf(options.progress, "\rstep %lld/%lld  loss %.4f  scale %g  %.2f steps/s  ETA %.0f s   ",
                       (long long)step, (long long)total_steps, loss, scale, rate, eta);
          std::fflush(options.progress);
        } else if (step == total_steps || step % std::max<std::int64_t>(1, total_steps / 20) == 0) {
          std::fprintf(options.progress, "step %lld/%lld loss %.4f scale %g %.2f steps/s ETA %.0f s\n",
                       (long long)step, (long long)total_steps, loss, scale, rate, eta);
        }
      }
    }
    ++epoch;
    if (config.steps == 0 || step >= total_steps) evaluate(step, epoch);
  }
  if (options.progress && options.progress_is_terminal) std::fprintf(options.progress, "\n");

  result.steps_done = step;
  result.final_loss_scale = scaler->scale();
  std::uint64_t param_count = 0;
  for (Parameter* p : emu.model.parameters()) param_count += std::uint64_t(p->value.size());
  result.memory =
      memory_for(param_count, policy, emu.optimizer->state_buffers_per_parameter(), activation_bytes);
  result.steps_csv = std::move(steps_csv);
  result.histograms_csv = std::move(hist_csv);

  nlohmann::json meta;
  meta["config"] = config.source;
  meta["name"] = config.name;
  meta["seed"] = config.seed;
  meta["git_commit"] = io::git_commit();
  meta["policy"] = policy.to_json();
  meta["loss_scaler"] = {{"policy", config.loss_scaler.policy},
                         {"final_scale", result.final_loss_scale},
                         {"state", scaler->state()}};
  meta["data"] = {{"description", data.description},
                  {"synthetic", data.synthetic},
                  {"train_samples", data.train.size()},
                  {"test_samples", data.test.size()}};
  meta["parameters"] = param_count;
  meta["memory"] = result.memory.to_json();
  meta["memory"]["activations_batch_size"] = config.batch_size;
  meta["steps"] = step;
  meta["skipped_steps"] = result.skipped_steps;
  meta["shadow"] = config.shadow;
  nlohmann::json evals = nlohmann::json::array();
  for (const auto& e : result.evaluations)
    evals.push_back({{"step", e.step},
                     {"epoch", e.epoch},
                     {"test_accuracy_percent", e.test_accuracy_percent},
                     {"shadow_test_accuracy_percent",
                      config.shadow ? nlohmann::json(e.shadow_test_accuracy_percent) : nlohmann::json()}});
  meta["evaluations"] = evals;
  meta["threads"] = omp_get_max_threads();
  meta["wall_time_seconds_nondeterministic"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  result.meta = meta;
  if (!options.out_dir.empty()) {
    io::write_atomic(options.out_dir / "steps.csv", result.steps_csv);
    io::write_atomic(options.out_dir / "histograms.csv", result.histograms_csv);
    io::write_atomic(options.out_dir / "meta.json", meta.dump(2) + "\n");
  }
  return result;
}

}  // namespace rpsim::sim::train
