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

// What the first pass leaves for the second: the sample-perfect plain
// models (in index order, as the ranking puts them) and how many; the
// second pass ranks them all.
struct PlainPass {
  std::vector<std::size_t> order;
  std::size_t perfect = 0;
  // Screen scores: the first pass scores only the models that give the
  // sample's first element (scored[i]); the second completes them.
  std::vector<InferredSchedule> screened;
  std::vector<bool> scored;
};

// exact_pass: screens every plain model on `sample`, checks those it cannot
// tell from a reproduction on `confirm` and those still perfect on the whole
// dump, adding the reproducing ones to r.exact. Otherwise (the second pass,
// run only while nothing reproduces the dump: each is a whole GEMM): the
// sample-perfect ones and the best `top` of the others, ranked into r.best.
// `stored` is the format A and B hold, `output` D's.
void infer_plain_models(const GemmDump& dump, const PlainSample& sample, const PlainSample& confirm,
                        const Format& stored, const Format& output, const InferOptions& options,
                        bool exact_pass, PlainPass& pass, InferResult& r);

}  // namespace rpsim::sim
