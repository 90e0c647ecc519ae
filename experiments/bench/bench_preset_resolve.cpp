// What resolving a cuBLAS kernel preset costs per call (issue #38): a dot
// product under `cublas:h100:fp16:fp32` (the preset picks the schedule of the
// 1 x 1 x K shape at every call) against the same dot under that schedule
// resolved once, and `rpsim.gemm`'s path (parse the spec, pick the schedule,
// run) on a small GEMM against the run alone. One thread, one process; the
// ratios of CPU times are printed at the end (1.0: resolving costs nothing).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"

namespace {

using rpsim::sim::AccumulationModel;
using rpsim::sim::Matrix;
constexpr const char* kPreset = "cublas:h100:fp16:fp32";
constexpr std::size_t kDotK = 256;
constexpr int kDots = 64;

std::vector<double> fp16_values(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  Matrix m(Eigen::Index(n), 1);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = nd(rng);
  m = rpsim::sim::round_to_format(m, rpsim::formats::binary16());
  return {m.data(), m.data() + m.size()};
}

std::map<std::string, double> g_seconds;

void run_dots(benchmark::State& state, const AccumulationModel& model) {
  const auto a = fp16_values(kDotK, 1), b = fp16_values(kDotK, 2);
  for (auto _ : state)
    for (int i = 0; i < kDots; ++i) benchmark::DoNotOptimize(model.dot(a, b, 0.0));
}

void BM_dot_preset(benchmark::State& state) {
  run_dots(state, AccumulationModel::parse(kPreset));
}

void BM_dot_resolved(benchmark::State& state) {
  const auto& p = std::get<rpsim::sim::KernelPreset>(AccumulationModel::parse(kPreset).variant());
  run_dots(state, AccumulationModel(p.for_shape(1, 1, long(kDotK))));
}

Matrix fp16_matrix(Eigen::Index r, Eigen::Index c, unsigned seed) {
  const auto v = fp16_values(std::size_t(r * c), seed);
  return Eigen::Map<const Matrix>(v.data(), r, c);
}

// rpsim.gemm(A, B, model="cublas:h100:fp16:fp32") on 8x8x256: the spec parsed
// and the schedule picked at every call, as the binding does.
void BM_gemm_parse(benchmark::State& state) {
  const Matrix a = fp16_matrix(8, 256, 3), b = fp16_matrix(256, 8, 4);
  for (auto _ : state) {
    Matrix d = rpsim::sim::gemm(AccumulationModel::parse(kPreset), a, b, rpsim::sim::GemmOptions{1});
    benchmark::DoNotOptimize(d.data());
  }
}

void BM_gemm_resolved(benchmark::State& state) {
  const Matrix a = fp16_matrix(8, 256, 3), b = fp16_matrix(256, 8, 4);
  const auto& p = std::get<rpsim::sim::KernelPreset>(AccumulationModel::parse(kPreset).variant());
  const AccumulationModel model(p.for_shape(8, 8, 256));
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
        g_seconds[r.benchmark_name()] = r.cpu_accumulated_time / static_cast<double>(r.iterations);
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

BENCHMARK(BM_dot_preset)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_dot_resolved)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_gemm_parse)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_gemm_resolved)->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const auto ratio = [](const char* x, const char* y) {
    return g_seconds[y] > 0 ? g_seconds[x] / g_seconds[y] : 0.0;
  };
  std::printf("%d dot products of K=%zu under %s: %.2fx the time under its resolved schedule\n", kDots, kDotK,
              kPreset, ratio("BM_dot_preset", "BM_dot_resolved"));
  std::printf("8x8x256 GEMM parsing %s per call: %.2fx the time of the resolved schedule\n", kPreset,
              ratio("BM_gemm_parse", "BM_gemm_resolved"));
  benchmark::Shutdown();
  return 0;
}
