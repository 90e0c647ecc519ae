// The candidates of gemm_infer.cpp's schedule search and how they are
// counted on samples of D, private to gemm_infer.cpp.
#pragma once

#include <vector>

#include "rpsim/validation/gemm_infer.hpp"

namespace rpsim::sim::infer_detail {

// Up to `count` elements of D as a sub-GEMM: evenly spaced rows and columns.
struct Sample {
  Matrix a, b, c, d;
};
Sample sample_of(const GemmDump& dump, std::size_t count);

// The elements of smp.d that schedule s gives bit for bit.
std::size_t score(const KernelSchedule& s, const Sample& smp);

struct Candidate {
  KernelSchedule schedule;
  std::size_t cls = 0;
  std::size_t sample_pass = 0, confirm_pass = 0;
};

// Every candidate counted on smp into `into`.
void score_all(std::vector<Candidate>& cands, const Sample& smp, int threads, std::size_t Candidate::*into);

// Stage 1's screen into sample_pass. Only the sample-perfect candidates
// survive it when there are at least `keep` of them, and they rank by their
// index (every perfect count ties): a candidate missing the sample's first
// element is then never counted (issue #30: the screen was most of
// --infer). With fewer perfect ones every candidate is counted, as the
// ranking below them needs.
void screen_all(std::vector<Candidate>& cands, const Sample& smp, int threads, std::size_t keep);

inline auto by(std::size_t Candidate::*field) {
  return [field](const Candidate& x, const Candidate& y) { return x.*field > y.*field; };
}

}  // namespace rpsim::sim::infer_detail
