// The plain accumulation models of gemm_infer.hpp's search (exact,
// sequential, fma, pairwise, blocked, Kahan; both K orders; binary32 inputs
// as they are or converted to tf32), private to gemm_infer.cpp.
#pragma once

#include <vector>

#include "rpsim/validation/gemm_infer.hpp"

namespace rpsim::sim {

struct PlainSample {
  Matrix a, b, c, d;  // a sub-GEMM of the dump: rows of A, columns of B, C and D there
};

// Screens every plain model on `sample` and checks on the whole dump those
// the sample cannot tell from a reproduction (`exact_pass`, adding them to
// r.exact or r.best), or else the best `top` of the others (the second pass,
// run only while nothing reproduces the dump: each is a whole GEMM).
// `stored` is the format A and B hold, `output` D's.
void infer_plain_models(const GemmDump& dump, const PlainSample& sample, const Format& stored,
                        const Format& output, const InferOptions& options, bool exact_pass, InferResult& r);

}  // namespace rpsim::sim
