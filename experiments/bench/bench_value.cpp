// The cost of the typed value layer (value.hpp) over calling the core
// directly: the same binary16 dot product (a rounded multiply and a rounded
// add per element) through rpsim::mul/add on bit patterns with a fixed
// Rounding, and through `half` operators (thread-local scope, cached format).
// Native float is the context baseline. Read the result as ratios of
// BM_dot_typed_half / BM_dot_core_ops (layer overhead) and of each to
// BM_dot_native_float (emulation cost), all from one run.
#include <benchmark/benchmark.h>

#include <vector>

#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/scoped_rounding.hpp"
#include "rpsim/formats/value.hpp"

namespace {

constexpr std::size_t kLength = 4096;

std::vector<double> inputs(std::uint64_t stream) {
  std::vector<double> v(kLength);
  for (std::size_t i = 0; i < kLength; ++i)
    v[i] = double(rpsim::counter_random(42, stream, i) >> 11) * 0x1p-53 * 2 - 1;
  return v;
}

void BM_dot_native_float(benchmark::State& state) {
  std::vector<float> x, y;
  for (double d : inputs(1)) x.push_back(float(d));
  for (double d : inputs(2)) y.push_back(float(d));
  for (auto _ : state) {
    float acc = 0;
    for (std::size_t i = 0; i < kLength; ++i) {
      benchmark::DoNotOptimize(acc);  // one rounding per operation, as in the emulated loops
      acc = acc + x[i] * y[i];
    }
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(std::int64_t(state.iterations() * kLength));
}

void BM_dot_core_ops(benchmark::State& state) {
  const rpsim::Format& f = rpsim::formats::binary16();
  std::vector<std::uint64_t> x, y;
  for (double d : inputs(1)) x.push_back(rpsim::round_double(f, d));
  for (double d : inputs(2)) y.push_back(rpsim::round_double(f, d));
  const rpsim::Rounding r;
  rpsim::Flags flags = 0;
  for (auto _ : state) {
    std::uint64_t acc = 0;
    for (std::size_t i = 0; i < kLength; ++i)
      acc = rpsim::add(f, acc, rpsim::mul(f, x[i], y[i], r, flags), r, flags);
    benchmark::DoNotOptimize(acc);
  }
  benchmark::DoNotOptimize(flags);
  state.SetItemsProcessed(std::int64_t(state.iterations() * kLength));
}

void BM_dot_typed_half(benchmark::State& state) {
  std::vector<rpsim::half> x, y;
  for (double d : inputs(1)) x.emplace_back(d);
  for (double d : inputs(2)) y.emplace_back(d);
  for (auto _ : state) {
    rpsim::half acc{};
    for (std::size_t i = 0; i < kLength; ++i) acc = acc + x[i] * y[i];
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(std::int64_t(state.iterations() * kLength));
}

// Stochastic rounding adds one counter_random draw per operation.
void BM_dot_typed_half_stochastic(benchmark::State& state) {
  std::vector<rpsim::half> x, y;
  for (double d : inputs(1)) x.emplace_back(d);
  for (double d : inputs(2)) y.emplace_back(d);
  rpsim::ScopedRounding sr(rpsim::RoundingMode::stochastic, 7);
  for (auto _ : state) {
    rpsim::half acc{};
    for (std::size_t i = 0; i < kLength; ++i) acc = acc + x[i] * y[i];
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(std::int64_t(state.iterations() * kLength));
}

BENCHMARK(BM_dot_native_float);
BENCHMARK(BM_dot_core_ops);
BENCHMARK(BM_dot_typed_half);
BENCHMARK(BM_dot_typed_half_stochastic);

}  // namespace

BENCHMARK_MAIN();
