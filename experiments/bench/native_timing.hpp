// CPU-time measuring of a native training step, shared by the benchmarks
// built with the project's flags (bench_train_common.hpp) and the
// -march=native library (native/native_steps.cpp), which links nothing else.
#pragma once

#include <algorithm>
#include <ctime>

namespace bench_native {

// Process CPU time: on a shared machine wall time would charge other
// processes' slices to the step.
inline double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// CPU seconds per call of `step` (returning the loss): one warm-up call,
// then the minimum over `repeats` of `steps` calls each (the minimum is the
// least disturbed by the other work on the machine).
template <class Step>
double seconds_per_step(Step&& step, int steps, int repeats) {
  volatile float sink = step();  // warm-up: first-touch allocations, caches
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = cpu_seconds();
    for (int s = 0; s < steps; ++s) sink = sink + step();
    best = std::min(best, (cpu_seconds() - t0) / steps);
  }
  return best;
}

}  // namespace bench_native
