// Whether a kernel schedule reproduces a GEMM's D bit for bit, for the
// --infer search (gemm_infer.cpp), private to it.
#pragma once

#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/validation/gemm_check.hpp"

namespace rpsim::sim {

// True when every element of A B (+ C; null: zero) under `s` has D's
// encoding. Computed in blocks of rows, 4 then doubling up to 32, and stopped
// at the first block with a miss: every row of a schedule's GEMM is computed
// on its own, so the blocks give the whole GEMM's bits. A reproducing
// candidate costs one GEMM; one missing rarely enough to pass a sample of D
// usually a block or two.
bool reproduces(const KernelSchedule& s, const Matrix& a, const Matrix& b, const Matrix* c, const Matrix& d,
                int threads);

}  // namespace rpsim::sim
