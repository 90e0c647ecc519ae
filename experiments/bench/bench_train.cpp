// Cost of one emulated training step (fp16-amp with the FP64 shadow) as a
// ratio to a native-float Eigen training step of the same 784-256-256-10 MLP,
// batch 128, SGD with momentum, measured in the same process.
#include <benchmark/benchmark.h>

#include <omp.h>
#include <Eigen/Core>

#include <chrono>
#include <ctime>

#include "rpsim/train/trainer.hpp"

namespace {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

using MatrixF = Eigen::MatrixXf;
constexpr int kBatch = 128;
constexpr int kSteps = 10;

// The same model in native binary32: forward, softmax cross-entropy,
// backward, SGD with momentum.
struct NativeMlp {
  std::vector<MatrixF> w, b, vw, vb;
  NativeMlp() {
    const int dims[] = {784, 256, 256, 10};
    for (int l = 0; l < 3; ++l) {
      w.push_back(MatrixF::Random(dims[l], dims[l + 1]) / std::sqrt(float(dims[l])));
      b.push_back(MatrixF::Random(1, dims[l + 1]) / std::sqrt(float(dims[l])));
      vw.push_back(MatrixF::Zero(dims[l], dims[l + 1]));
      vb.push_back(MatrixF::Zero(1, dims[l + 1]));
    }
  }
  float step(const MatrixF& x, const std::vector<int>& labels, float lr, float momentum) {
    std::vector<MatrixF> acts{x};
    for (int l = 0; l < 3; ++l) {
      MatrixF z = acts.back() * w[l];
      z.rowwise() += b[l].row(0);
      if (l < 2) z = z.cwiseMax(0.0f);
      acts.push_back(std::move(z));
    }
    MatrixF p = acts.back();
    float loss = 0;
    for (int i = 0; i < p.rows(); ++i) {
      const float m = p.row(i).maxCoeff();
      p.row(i) = (p.row(i).array() - m).exp();
      const float s = p.row(i).sum();
      p.row(i) /= s;
      loss -= std::log(p(i, labels[std::size_t(i)]));
      p(i, labels[std::size_t(i)]) -= 1.0f;
    }
    MatrixF d = p / float(p.rows());
    for (int l = 2; l >= 0; --l) {
      const MatrixF gw = acts[std::size_t(l)].transpose() * d;
      const MatrixF gb = d.colwise().sum();
      if (l > 0)
        d = ((d * w[std::size_t(l)].transpose()).array() * (acts[std::size_t(l)].array() > 0).cast<float>())
                .matrix();
      vw[std::size_t(l)] = momentum * vw[std::size_t(l)] + gw;
      vb[std::size_t(l)] = momentum * vb[std::size_t(l)] + gb;
      w[std::size_t(l)] -= lr * vw[std::size_t(l)];
      b[std::size_t(l)] -= lr * vb[std::size_t(l)];
    }
    return loss / float(p.rows());
  }
};

rpsim::sim::train::Config emulated_config(const std::string& policy, bool shadow) {
  auto j = nlohmann::json::parse(R"({
    "name": "bench", "seed": 0,
    "model": {"type": "mlp", "hidden": [256, 256]},
    "data": {"name": "synthetic", "synthetic_test_size": 1},
    "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
    "batch_size": 128, "evaluate": false, "telemetry": {"histogram_steps": []}
  })");
  j["policy"] = policy;
  j["shadow"] = shadow;
  j["steps"] = kSteps;
  j["data"]["synthetic_train_size"] = kBatch * kSteps;
  return rpsim::sim::train::parse_config(j);
}

double native_seconds_per_step() {
  NativeMlp net;
  const MatrixF x = MatrixF::Random(kBatch, 784);
  std::vector<int> labels(kBatch);
  for (int i = 0; i < kBatch; ++i) labels[std::size_t(i)] = i % 10;
  net.step(x, labels, 0.05f, 0.9f);  // warm-up
  const double t0 = cpu_seconds();
  float sink = 0;
  for (int s = 0; s < kSteps; ++s) sink += net.step(x, labels, 0.05f, 0.9f);
  benchmark::DoNotOptimize(sink);
  return (cpu_seconds() - t0) / kSteps;
}

// Emulated: run() on kSteps synthetic batches (includes generating the
// synthetic data once, a few ms, which biases the ratio slightly upward).
double emulated_seconds_per_step(const rpsim::sim::train::Config& c) {
  const double t0 = cpu_seconds();
  const auto r = rpsim::sim::train::run(c, {});
  benchmark::DoNotOptimize(r.final_loss);
  return (cpu_seconds() - t0) / kSteps;
}

void BM_native_float_step(benchmark::State& state) {
  omp_set_num_threads(1);
  Eigen::setNbThreads(1);
  for (auto _ : state) state.counters["ms_per_step"] = 1e3 * native_seconds_per_step();
}

void ratio_benchmark(benchmark::State& state, const std::string& policy, bool shadow) {
  const auto config = emulated_config(policy, shadow);
  omp_set_num_threads(1);
  Eigen::setNbThreads(1);
  for (auto _ : state) {
    const double native = native_seconds_per_step();
    const double emulated = emulated_seconds_per_step(config);
    state.counters["native_ms_per_step"] = 1e3 * native;
    state.counters["emulated_ms_per_step"] = 1e3 * emulated;
    state.counters["ratio_to_native"] = emulated / native;
  }
}

void BM_fp16_amp_with_shadow(benchmark::State& state) {
  ratio_benchmark(state, "fp16-amp", true);
}
void BM_fp16_amp_no_shadow(benchmark::State& state) {
  ratio_benchmark(state, "fp16-amp", false);
}
void BM_fp32_with_shadow(benchmark::State& state) {
  ratio_benchmark(state, "fp32", true);
}
void BM_bf16_pure_sr_no_shadow(benchmark::State& state) {
  ratio_benchmark(state, "bf16-pure", false);
}

}  // namespace

BENCHMARK(BM_native_float_step)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_fp16_amp_with_shadow)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_fp16_amp_no_shadow)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_fp32_with_shadow)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_bf16_pure_sr_no_shadow)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_MAIN();
