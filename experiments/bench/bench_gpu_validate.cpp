// The CPU side of `rpsim gpu-validate --exhaustive-conversions` without a GPU:
// for each of the 12 conversion intrinsics with binary32 input, the emulator's
// prediction and the bit comparison for all 2^32 inputs (check_conversion_range,
// all OpenMP threads, chunks of 2^26 as gpu-validate takes them). The "device
// results" it compares against are the emulator's own, made between timings.
// Baseline in the same process: the CPU's own F16C conversion with the same
// comparison (BM_f16c_check), what a native check would cost.
//
// BM_check_sampled covers 64 evenly spaced windows of 2^20 inputs (every
// exponent range in proportion) and is quick; BM_check_all/N is the full 2^32
// of intrinsic N (run with --benchmark_filter=all to time the whole space).
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <sys/resource.h>

#include <bit>
#include <vector>

#include "rpsim/validation/gpu_validation.hpp"

namespace {

using rpsim::sim::BitCheck;
using rpsim::sim::ConversionSpec;

constexpr std::size_t kChunk = std::size_t(1) << 26;

// CPU seconds of every thread of the process so far: on a shared machine the
// wall time says little, the CPU time per 2^32 inputs divided by the cores
// says what a free host takes.
double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

void report_cpu(benchmark::State& state, double cpu_s, double inputs) {
  state.counters["cpu_s_per_2^32"] = cpu_s / inputs * 0x1p32;
}

const ConversionSpec& spec(std::int64_t i) {
  static const std::vector<ConversionSpec> specs = rpsim::sim::float_conversion_specs();
  return specs.at(std::size_t(i));
}

void BM_check_sampled(benchmark::State& state) {
  const ConversionSpec& s = spec(state.range(0));
  constexpr std::size_t windows = 64, width = std::size_t(1) << 20;
  std::vector<std::vector<std::uint32_t>> got(windows, std::vector<std::uint32_t>(width));
  for (std::size_t w = 0; w < windows; ++w)
    rpsim::sim::emulate_conversion_range(s, std::uint32_t(w << 26), got[w]);
  const double cpu0 = process_cpu_s();
  for (auto _ : state) {
    BitCheck check;
    for (std::size_t w = 0; w < windows; ++w)
      rpsim::sim::check_conversion_range(s, std::uint32_t(w << 26), got[w], check);
    if (check.passed != check.total) state.SkipWithError("mismatch");
  }
  report_cpu(state, process_cpu_s() - cpu0, double(state.iterations() * windows * width));
  state.SetLabel(s.name);
  state.SetItemsProcessed(std::int64_t(state.iterations() * windows * width));
}

void BM_check_all(benchmark::State& state) {
  const ConversionSpec& s = spec(state.range(0));
  std::vector<std::uint32_t> got(kChunk);
  double cpu_s = 0;
  for (auto _ : state) {
    BitCheck check;
    for (std::uint64_t first = 0; first < (std::uint64_t(1) << 32); first += kChunk) {
      state.PauseTiming();
      rpsim::sim::emulate_conversion_range(s, std::uint32_t(first), got);
      state.ResumeTiming();
      const double cpu0 = process_cpu_s();
      rpsim::sim::check_conversion_range(s, std::uint32_t(first), got, check);
      cpu_s += process_cpu_s() - cpu0;
    }
    if (check.passed != check.total) state.SkipWithError("mismatch");
  }
  report_cpu(state, cpu_s, double(state.iterations()) * 0x1p32);
  state.SetLabel(s.name);
  state.SetItemsProcessed(std::int64_t(state.iterations()) << 32);
}

// The native check of __float2half_rn's emulation on 2^26 inputs: F16C
// converts, the same comparison counts.
__attribute__((target("f16c,avx2"))) void BM_f16c_check(benchmark::State& state) {
  std::vector<std::uint32_t> got(kChunk);
  rpsim::sim::emulate_conversion_range(spec(0), 0x30000000u, got);
  for (auto _ : state) {
    std::size_t passed = 0;
#pragma omp parallel for reduction(+ : passed) schedule(static)
    for (std::size_t i = 0; i < kChunk; i += 8) {
      const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(int(0x30000000u + i)),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const __m128i h = _mm256_cvtps_ph(_mm256_castsi256_ps(idx), _MM_FROUND_TO_NEAREST_INT);
      alignas(16) std::uint16_t out[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(out), h);
      for (int j = 0; j < 8; ++j) passed += out[j] == got[i + std::size_t(j)];
    }
    if (passed != kChunk) state.SkipWithError("F16C disagrees with the emulator");
  }
  state.SetItemsProcessed(std::int64_t(state.iterations() * kChunk));
}

}  // namespace

BENCHMARK(BM_f16c_check)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_check_sampled)->DenseRange(0, 11)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_check_all)->DenseRange(0, 11)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
BENCHMARK_MAIN();
