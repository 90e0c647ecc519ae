// The cost of the typed value layer (value.hpp) over calling the core
// directly: the same binary16 dot product (a rounded multiply and a rounded
// add per element) through rpsim::mul/add on bit patterns with a fixed
// Rounding, and through `half` operators (thread-local scope, cached format).
// Native float is the context baseline. Read the result as ratios of
// BM_dot_typed_half / BM_dot_core_ops (layer overhead) and of each to
// BM_dot_native_float (emulation cost), all from one run.
// After the benchmarks, a table times scalar convert() against its general
// path (convert_paths.hpp) on the same inputs, interleaved, and prints
// general / fast: the speed-up of the integer fast path.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "rpsim/formats/convert_paths.hpp"

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

// Uniform bits over the finite binary32 range and (-1, 1) data: the long
// binary32 test's load and the common training case.
std::vector<std::uint64_t> convert_inputs(const rpsim::Format& from, bool uniform_bits) {
  std::vector<std::uint64_t> v(kLength);
  for (std::size_t i = 0; i < kLength; ++i) {
    const double d = double(rpsim::counter_random(5, 3, i) >> 11) * 0x1p-53 * 2 - 1;
    v[i] = uniform_bits ? rpsim::counter_random(5, 4, i) & from.bit_mask() : rpsim::round_double(from, d);
  }
  return v;
}

// Thread CPU time, not wall time: on a shared machine the wall clock counts
// the time other processes hold the core, which swamps a 2x difference.
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

template <class Convert>
double seconds_per_call(const std::vector<std::uint64_t>& in, Convert convert) {
  std::uint64_t sum = 0;
  const double t0 = thread_seconds();
  constexpr int kRepeats = 200;
  for (int k = 0; k < kRepeats; ++k)
    for (std::uint64_t x : in) sum += convert(x);
  const double t1 = thread_seconds();
  benchmark::DoNotOptimize(sum);
  return (t1 - t0) / double(kRepeats * in.size());
}

void print_convert_ratios() {
  struct Case {
    const char* from;
    const char* to;
    rpsim::RoundingMode mode;
    bool uniform_bits;
    const char* data;
  };
  using M = rpsim::RoundingMode;
  const Case cases[] = {
      {"binary32", "binary16", M::nearest_even, true, "all bits"},
      {"binary32", "binary16", M::toward_zero, true, "all bits"},
      {"binary32", "bfloat16", M::nearest_even, true, "all bits"},
      {"binary64", "binary16", M::nearest_even, false, "(-1,1)"},
      {"binary64", "bfloat16", M::up, false, "(-1,1)"},
      {"binary64", "e5m2", M::nearest_even, false, "(-1,1)"},
  };
  std::printf(
      "\nscalar convert: general path / fast path, same inputs, thread CPU time, min of 15 interleaved "
      "runs\n");
  std::printf("%-9s %-9s %-4s %-9s %10s %10s %8s\n", "from", "to", "mode", "data", "general ns", "fast ns",
              "speed-up");
  for (const Case& c : cases) {
    const rpsim::Format& from = rpsim::format(c.from);
    const rpsim::Format& to = rpsim::format(c.to);
    rpsim::Rounding r;
    r.mode = c.mode;
    const auto in = convert_inputs(from, c.uniform_bits);
    rpsim::Flags fl = 0;
    double general = 1e9, fast = 1e9;
    for (int run = 0; run < 15; ++run) {
      general = std::min(general, seconds_per_call(in, [&](std::uint64_t x) {
                           return rpsim::convert_general(to, from, x, r, fl);
                         }));
      fast = std::min(
          fast, seconds_per_call(in, [&](std::uint64_t x) { return rpsim::convert(to, from, x, r, fl); }));
    }
    std::printf("%-9s %-9s %-4s %-9s %10.2f %10.2f %7.2fx\n", c.from, c.to,
                std::string(rpsim::rounding_name(c.mode)).c_str(), c.data, general * 1e9, fast * 1e9,
                general / fast);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_convert_ratios();
  return 0;
}
