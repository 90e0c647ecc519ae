// How many OpenMP threads the trainer gives one emulated product (issue #36).
#pragma once

#include <omp.h>

namespace rpsim::sim::train::detail {

// Multiply-adds from which an emulated product (a rounded-accumulator grid,
// a Tensor Core or kernel-schedule model, a block-scaled GEMM) uses the
// threads. Each emulated multiply-add costs a few nanoseconds, so 2^15 of
// them are about 0.1 ms of work; below that, waking the team and meeting at
// its barrier cost as much as the product, and far more when other
// processes hold the cores (the thread the barrier waits for then runs only
// when the scheduler hands its core back). The result never depends on it.
inline constexpr double kParallelMultiplyAdds = double(1 << 15);

// omp_get_max_threads() for a product of m*n*k multiply-adds, 1 below the threshold.
inline int threads_for_product(double m, double n, double k) {
  return m * n * k >= kParallelMultiplyAdds ? omp_get_max_threads() : 1;
}

}  // namespace rpsim::sim::train::detail
