// The split-K slices cublas:h100 guesses from the H100 measurements
// (cublas_h100_guess.cpp). Internal to sim/accumulation.
#pragma once

#include <utility>

namespace rpsim::sim::cublas_detail {

enum class Kind { fp16, bf16, tf32, fp8 };

// (split_k, split_tile) for an M x N x K GEMM of an fp16, bf16 or tf32 kind:
// the measured shape's own, else the nearest measured one's (fp16/bf16 moved
// along K by the nvjet k-tile rule).
std::pair<int, int> h100_grid_split(Kind kind, long m, long n, long k);

}  // namespace rpsim::sim::cublas_detail
