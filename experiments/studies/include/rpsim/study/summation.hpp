// Study 1, `summation`: how does rounding error grow with the number of terms?
// Recursive summation of a constant stagnates under round-to-nearest once the
// addend falls below half an ulp of the sum (fp16 at 2048, bf16 at 256 for
// ones), while stochastic rounding keeps an unbiased sum whose deviation grows
// like sqrt(n) (Connolly, Higham & Mary, SISC 2021). Error of sums and dot
// products against n for every accumulation model is compared with the
// deterministic bound gamma_n*u and the probabilistic sqrt(n)*u (Higham & Mary,
// SISC 2019).
#pragma once

#include <cstdint>
#include <vector>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/study/study.hpp"

namespace rpsim::sim::study {

struct ConstantSum {
  double final_sum = 0;
  // Deterministic modes: the first partial sum s with s + addend == s (after
  // which the sum never changes again), and how many terms it took; -1 and
  // NaN when the sum never stagnated within n terms.
  std::int64_t stagnation_terms = -1;
  double stagnation_value = 0;
  std::vector<std::pair<std::int64_t, double>> samples;  // (terms, partial sum) at sample_at
};

// s_0 = 0, s_i = fl(s_{i-1} + addend) in `fmt` with `mode`, i = 1..n.
// Stochastic rounding draws counter_random(seed, 0, i) for the i-th addition.
// `sample_at` must be increasing.
ConstantSum recursive_constant_sum(const Format& fmt, double addend, std::int64_t n, RoundingMode mode,
                                   std::uint64_t seed = 0, const std::vector<std::int64_t>& sample_at = {});

// The spread of the stochastically rounded sum of n copies of `addend`.
// Each rounding error d_i is unbiased up to the k-bit truncation of the
// discarded fraction (|E d_i| <= u_i*2^-k, u_i the spacing at the i-th
// partial sum), and Var d_i = f_i(1-f_i)u_i^2 <= u_i^2/4 with f_i = the
// discarded fraction of an ulp. The d_i are martingale differences, so the
// variance of the total error is the sum of the per-step variances. The
// spacing is taken at the exact partial sum i*addend.
struct StochasticSumBound {
  double exact_sum = 0;
  double sigma = 0;         // sqrt(sum f_i(1-f_i) u_i^2)
  double sigma_ulp2_4 = 0;  // sqrt(sum u_i^2/4): the fraction-free bound
  double bias = 0;          // sum u_i*2^-k
  double bound(double sigmas) const { return sigmas * sigma + bias; }
};
StochasticSumBound stochastic_constant_sum_bound(const Format& fmt, double addend, std::int64_t n,
                                                 int stochastic_bits);

// The study entry point (registered in studies()).
StudyOutput run_summation(const StudyOptions& options);

}  // namespace rpsim::sim::study
