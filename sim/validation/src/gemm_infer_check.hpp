// Whether a kernel schedule reproduces a GEMM's D bit for bit, and what
// formats a dump's values are in, for the --infer search (gemm_infer.cpp),
// private to it.
#pragma once

#include <vector>

#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/validation/gemm_infer.hpp"

namespace rpsim::sim {

// What the values are (r.stored, r.input, r.output) and the input
// conversions to try; throws GemmDumpError for values of no format the
// search knows.
void value_formats(const GemmDump& dump, InferResult& r, std::vector<RoundingMode>& conversions);

// True when every element of A B (+ C; null: zero) under `s` has D's
// encoding. Computed in blocks of rows, 4 then doubling up to 32, and stopped
// at the first block with a miss: every row of a schedule's GEMM is computed
// on its own, so the blocks give the whole GEMM's bits. A reproducing
// candidate costs one GEMM; one missing rarely enough to pass a sample of D
// usually a block or two.
bool reproduces(const KernelSchedule& s, const Matrix& a, const Matrix& b, const Matrix* c, const Matrix& d,
                int threads);

// reproduces() for each of `s`, those running the same chains computed
// together (gemm_fold_group): a group's blocks stop at the first miss of each
// member and end when none is left.
std::vector<bool> reproduce_all(const std::vector<KernelSchedule>& s, const Matrix& a, const Matrix& b,
                                const Matrix* c, const Matrix& d, int threads);

}  // namespace rpsim::sim
