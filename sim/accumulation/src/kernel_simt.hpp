// cuBLAS's CUDA-core (SIMT) kernels as kernel-schedule orders
// (kernel_schedule.hpp, SimtOrder): the sum each thin-shape kernel forms from
// binary32 FMAs. Internal to sim/accumulation.
#pragma once

#include <cstddef>

#include "gemm_chains.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"

namespace rpsim::sim {

// The binary32 partial of products [k0, k1) of a (stride as) and b (stride
// bs) under s.simt (not none).
double simt_chunk(const KernelSchedule& s, const double* a, std::ptrdiff_t as, const double* b,
                  std::ptrdiff_t bs, long k0, long k1);

// D = A*B + C under a schedule with a simt order: each slice (chunks) by
// simt_chunk, the slices merged and C, scales and the output conversion
// applied as for Tensor Core schedules (kernel_fold.hpp). A and B as stored:
// a CUDA core multiplies the stored values (fp16, bf16, binary32) as they are.
Matrix gemm_simt(const KernelSchedule& s, const Matrix& a, const Matrix& b, const Matrix& c, int threads,
                 const TensorScales& scales = {});

}  // namespace rpsim::sim
