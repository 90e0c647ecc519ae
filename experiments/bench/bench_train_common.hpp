// The measuring shared by the training-step benchmarks (bench_train.cpp for
// the MLP, bench_train_gpt.cpp for the GPT): CPU time, the marginal cost of
// an emulated step, the native baseline's cost and the closing table. Only
// .cpp files in bench/ become programs; this header is included by them.
#pragma once

#include <benchmark/benchmark.h>

#include <omp.h>
#include <Eigen/Core>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "native/native_steps.h"
#include "native_timing.hpp"
#include "rpsim/config/config.hpp"
#include "rpsim/io/process.hpp"
#include "rpsim/train/trainer.hpp"

namespace bench_train {

using bench_native::cpu_seconds;

// One thread each side: the ratio is per core, not a race of thread pools.
inline void single_thread() {
  omp_set_num_threads(1);
  Eigen::setNbThreads(1);
}

inline double run_seconds(const rpsim::sim::train::Config& c) {
  const double t0 = cpu_seconds();
  const auto r = rpsim::sim::train::run(c, {});
  benchmark::DoNotOptimize(r.final_loss);
  return cpu_seconds() - t0;
}

// Before any timing: the rpsim binary's malloc settings (io::
// keep_freed_memory), then one short emulated run (`c`, a couple of steps):
// until a large block has been freed, glibc's malloc maps and unmaps every
// temporary over 128 KiB (its dynamic mmap threshold), so the first native
// steps measured paid a page fault per touched page and read about 25%
// slower than every later one.
inline void warm_allocator(const rpsim::sim::train::Config& c) {
  rpsim::io::keep_freed_memory();  // as the rpsim binary's main does
  run_seconds(c);
}

// Marginal CPU seconds of one emulated step: `once` runs N steps, `twice`
// 2N on the same data; min over repeats of each, then their difference over
// N, so the set-up every run pays once (data, model, meta.json) is not
// charged to the steps.
inline double emulated_seconds_per_step(const rpsim::sim::train::Config& once,
                                        const rpsim::sim::train::Config& twice, int repeats) {
  double t1 = 1e30, t2 = 1e30;
  for (int r = 0; r < repeats; ++r) {
    t1 = std::min(t1, run_seconds(once));
    t2 = std::min(t2, run_seconds(twice));
  }
  return (t2 - t1) / double(twice.steps - once.steps);
}

struct Row {
  std::string label;
  double native_ms, emulated_ms, march_native_ms;
};

// In the order the benchmarks ran.
inline std::vector<Row>& rows() {
  static std::vector<Row> r;
  return r;
}

// The benchmark's counters and the table's row for one configuration.
// march_native_s: the same native step built -march=native
// (native/native_steps.cpp), the fastest native step on this CPU.
inline void record(benchmark::State& state, const std::string& label, double native_s, double emulated_s,
                   double march_native_s) {
  state.counters["native_ms_per_step"] = 1e3 * native_s;
  state.counters["emulated_ms_per_step"] = 1e3 * emulated_s;
  state.counters["ratio_to_native"] = emulated_s / native_s;
  state.counters["march_native_ms_per_step"] = 1e3 * march_native_s;
  state.counters["ratio_to_march_native"] = emulated_s / march_native_s;
  rows().push_back(Row{label, 1e3 * native_s, 1e3 * emulated_s, 1e3 * march_native_s});
}

// `heading`: the first column's title (what a step is, and how it was timed).
inline void print_table(const std::string& heading) {
  std::printf("\n| %s | native ms | emulated ms | x native | native -march=native ms | x that |\n",
              heading.c_str());
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows())
    std::printf("| %s | %.2f | %.2f | %.2fx | %.2f | %.2fx |\n", r.label.c_str(), r.native_ms, r.emulated_ms,
                r.emulated_ms / r.native_ms, r.march_native_ms, r.emulated_ms / r.march_native_ms);
  std::printf("(native: built like rpsim, x86-64 baseline; -march=native: %s)\n", rpsim_bench_native_flags());
}

}  // namespace bench_train
