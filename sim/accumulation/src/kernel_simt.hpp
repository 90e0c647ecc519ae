// cuBLAS's CUDA-core (SIMT) kernels as kernel-schedule orders
// (kernel_schedule.hpp, SimtOrder): the sum each thin-shape kernel forms from
// binary32 FMAs. Internal to sim/accumulation.
#pragma once

#include <cstddef>
#include <span>

#include "gemm_chains.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"

namespace rpsim::sim {

// Scratch accumulators an order needs: gemv's lanes; dot's 128 threads,
// reduce_1Block's 128 and its blocks' partials.
inline long simt_scratch(const KernelSchedule& s) {
  switch (s.simt) {
    case SimtOrder::gemv:
    case SimtOrder::gemv_slices: return s.simt_threads;
    case SimtOrder::dot: return 256L + s.split_k;
    default: return 0;
  }
}

// The orders on a block of kRows x kCols outputs at once, one AVX-512 lane
// each (kernel_simt_avx512.cpp; the orders written once in
// kernel_simt_orders.hpp).
namespace simt_avx512 {
inline constexpr int kRows = 16, kCols = 4;
// The CPU runs the block kernel, and s's scratch is small enough for it.
bool usable(const KernelSchedule& s);
// The scratch (binary32 values) block() needs under s.
std::size_t scratch_floats(const KernelSchedule& s);
// Rows [0, kRows) of `a` (binary32, column-major, leading dimension lda)
// against columns [0, kCols) of `b` (column-major, ldb), for each chunk q:
// out[(q * kCols + c) * kRows + r] the binary32 partial of the chunk's
// products for row r, column c, under s.simt.
void block(const KernelSchedule& s, std::span<const KChunk> chunks, const float* a, long lda, const float* b,
           long ldb, float* out, float* scratch);
}  // namespace simt_avx512

// D = A*B + C under a schedule with a simt order: each slice (chunks) by
// the order (kernel_simt_orders.hpp), the slices merged and C, scales and the output conversion
// applied as for Tensor Core schedules (kernel_fold.hpp). A and B as stored:
// a CUDA core multiplies the stored values (fp16, bf16, binary32) as they are.
Matrix gemm_simt(const KernelSchedule& s, const Matrix& a, const Matrix& b, const Matrix& c, int threads,
                 const TensorScales& scales = {});

}  // namespace rpsim::sim
