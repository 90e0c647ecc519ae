// Throughput of the kernel-schedule GEMM under the cuBLAS H100 presets at
// the largest measured shape, 128x128x4096 (what `rpsim gemm-check` runs on
// shared/cublas-h100), against Eigen's native float GEMM of the same shape,
// one thread each, in one process. Issue #14 asks for under a second; the
// ratio to native is printed per preset.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"

namespace {

using rpsim::sim::Matrix;
constexpr Eigen::Index kM = 128, kN = 128, kK = 4096;

struct Inputs {
  Matrix a, b;
  Eigen::MatrixXf af, bf;
  Inputs() {
    std::mt19937_64 rng(14);
    std::normal_distribution<double> nd(0, 1);
    a.resize(kM, kK);
    b.resize(kK, kN);
    for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = nd(rng);
    for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = nd(rng);
    af = a.cast<float>();
    bf = b.cast<float>();
  }
};

const Inputs& inputs() {
  static const Inputs in;
  return in;
}

std::map<std::string, double> g_seconds;

void BM_native_float_gemm(benchmark::State& state) {
  Eigen::setNbThreads(1);
  const auto& in = inputs();
  Eigen::MatrixXf d(kM, kN);
  for (auto _ : state) {
    d.noalias() = in.af * in.bf;
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
}

// One preset; A and B rounded to its stored format once, outside the timing.
void BM_schedule(benchmark::State& state, const char* spec) {
  const auto model = rpsim::sim::AccumulationModel::parse(spec);
  const Matrix a = rpsim::sim::round_to_format(inputs().a, model.input_format());
  const Matrix b = rpsim::sim::round_to_format(inputs().b, model.input_format());
  for (auto _ : state) {
    Matrix d = rpsim::sim::gemm(model, a, b, rpsim::sim::GemmOptions{1});
    benchmark::DoNotOptimize(d.data());
  }
}

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs)
      if (r.run_type == Run::RT_Iteration && r.iterations > 0)
        g_seconds[r.benchmark_name()] = r.real_accumulated_time / static_cast<double>(r.iterations);
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

BENCHMARK(BM_native_float_gemm)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_schedule, cublas_h100_fp16_fp32, "cublas:h100:fp16:fp32")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_schedule, cublas_h100_bf16_bf16, "cublas:h100:bf16:bf16")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_schedule, cublas_h100_tf32_fp32, "cublas:h100:tf32:fp32")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_schedule, cublas_h100_e4m3_fp32, "cublas:h100:e4m3:fp32")->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double native = g_seconds["BM_native_float_gemm"];
  for (const auto& [name, seconds] : g_seconds)
    if (native > 0 && name != "BM_native_float_gemm")
      std::printf("%s 128x128x4096: %.1f ms, 1/%.1f of native float (%.3f ms; aim 1/10, limit 1 s)\n",
                  name.c_str(), seconds * 1e3, seconds / native, native * 1e3);
  benchmark::Shutdown();
  return 0;
}
