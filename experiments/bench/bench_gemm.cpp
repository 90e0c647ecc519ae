// Throughput of the Tensor Core model GEMM (512x512x512, fp16 inputs, H100
// preset, one thread) against Eigen's native float GEMM of the same size (one
// thread), in one process. The ratio is printed by wall and by CPU time, with
// the kernel the model ran (avx512 or portable, gemm_kernel.hpp); and the
// CUDA-core gemmSN order's AVX-512 blocks against its portable path.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstdint>
#include <cstdio>
#include <random>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/gemm_kernel.hpp"

namespace {

using rpsim::sim::Matrix;
constexpr Eigen::Index kSize = 512;

// fp16 values (normal, rounded) for an m x k by k x n GEMM, C zero; the
// binary32 copies for the native baseline.
struct Inputs {
  Matrix a, b, c;
  Eigen::MatrixXf af, bf;
  Inputs(Eigen::Index m, Eigen::Index k, Eigen::Index n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd(0, 1);
    a.resize(m, k);
    b.resize(k, n);
    for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = nd(rng);
    for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = nd(rng);
    a = rpsim::sim::round_to_format(a, rpsim::formats::binary16());
    b = rpsim::sim::round_to_format(b, rpsim::formats::binary16());
    c = Matrix::Zero(m, n);
    af = a.cast<float>();
    bf = b.cast<float>();
  }
};

const Inputs& inputs() {
  static const Inputs in(kSize, kSize, kSize, 11);
  return in;
}

double g_native_seconds = 0, g_model_seconds = 0, g_native_cpu = 0, g_model_cpu = 0, g_portable_cpu = 0;

void BM_native_float_gemm(benchmark::State& state) {
  Eigen::setNbThreads(1);
  const auto& in = inputs();
  Eigen::MatrixXf d(kSize, kSize);
  for (auto _ : state) {
    d.noalias() = in.af * in.bf;
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  state.counters["flops"] =
      benchmark::Counter(2.0 * kSize * kSize * kSize, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_tensor_core_h100_gemm(benchmark::State& state) {
  const auto& in = inputs();
  const auto model = rpsim::sim::AccumulationModel::parse("tc:h100:fp16:fp32");
  for (auto _ : state) {
    Matrix d = rpsim::sim::gemm(model, in.a, in.b, in.c, rpsim::sim::GemmOptions{1});
    benchmark::DoNotOptimize(d.data());
  }
  state.counters["flops"] =
      benchmark::Counter(2.0 * kSize * kSize * kSize, benchmark::Counter::kIsIterationInvariantRate);
}

// The same model on the portable scalar chain (the kernel without AVX-512):
// what the AVX-512 tile kernel gains, same bits.
void BM_tensor_core_h100_gemm_portable(benchmark::State& state) {
  rpsim::sim::set_gemm_isa(rpsim::ArrayIsa::portable);
  BM_tensor_core_h100_gemm(state);
  rpsim::sim::set_gemm_isa(rpsim::ArrayIsa::best);
}

// cuBLAS's CUDA-core gemmSN order (one binary32 FFMA chain an output) at a
// thin convolution shape (8192 x 144 x 16: a 16-channel 3x3 layer's im2col
// GEMM), on the AVX-512 blocks of outputs and on the portable one-output
// path (one fmaf call a product), one thread; same bits.
double g_simt_cpu = 0, g_simt_portable_cpu = 0;

void BM_simt_gemmsn(benchmark::State& state) {
  static const Inputs in(8192, 144, 16, 12);
  const auto model = rpsim::sim::AccumulationModel::parse("kernel:h100:fp16:fp32:simt=gemmsn");
  for (auto _ : state) {
    Matrix d = rpsim::sim::gemm(model, in.a, in.b, in.c, rpsim::sim::GemmOptions{1});
    benchmark::DoNotOptimize(d.data());
  }
  state.counters["flops"] =
      benchmark::Counter(2.0 * 8192 * 144 * 16, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_simt_gemmsn_portable(benchmark::State& state) {
  rpsim::sim::set_gemm_isa(rpsim::ArrayIsa::portable);
  BM_simt_gemmsn(state);
  rpsim::sim::set_gemm_isa(rpsim::ArrayIsa::best);
}

// Reports the measured times of the benchmarks above and their ratios.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.iterations == 0) continue;
      const double per_iter = r.real_accumulated_time / static_cast<double>(r.iterations);
      const double cpu = r.cpu_accumulated_time / static_cast<double>(r.iterations);
      if (r.benchmark_name().find("native_float") != std::string::npos) {
        g_native_seconds = per_iter;
        g_native_cpu = cpu;
      }
      if (r.benchmark_name().find("simt") != std::string::npos) {
        (r.benchmark_name().find("portable") != std::string::npos ? g_simt_portable_cpu : g_simt_cpu) = cpu;
        continue;
      }
      if (r.benchmark_name().find("portable") != std::string::npos) {
        g_portable_cpu = cpu;
      } else if (r.benchmark_name().find("tensor_core") != std::string::npos) {
        g_model_seconds = per_iter;
        g_model_cpu = cpu;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

BENCHMARK(BM_native_float_gemm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_tensor_core_h100_gemm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_tensor_core_h100_gemm_portable)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_simt_gemmsn)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_simt_gemmsn_portable)->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (g_native_seconds > 0 && g_model_seconds > 0)
    std::printf(
        "tensor-core model / native float GEMM throughput ratio: 1/%.1f (native %.3f ms, model %.3f ms; "
        "CPU time 1/%.1f; model kernel %s; target >= 1/5, issue #30)\n",
        g_model_seconds / g_native_seconds, g_native_seconds * 1e3, g_model_seconds * 1e3,
        g_model_cpu / g_native_cpu, rpsim::sim::gemm_kernel_isa());
  if (g_portable_cpu > 0 && g_model_cpu > 0)
    std::printf("portable chain: 1/%.1f of native by CPU time; the %s kernel is %.1fx the portable one\n",
                g_portable_cpu / g_native_cpu, rpsim::sim::gemm_kernel_isa(), g_portable_cpu / g_model_cpu);
  if (g_simt_cpu > 0 && g_simt_portable_cpu > 0)
    std::printf("CUDA-core gemmSN at 8192x144x16: the %s path is %.1fx the portable one by CPU time\n",
                rpsim::sim::gemm_kernel_isa(), g_simt_portable_cpu / g_simt_cpu);
  benchmark::Shutdown();
  return 0;
}
