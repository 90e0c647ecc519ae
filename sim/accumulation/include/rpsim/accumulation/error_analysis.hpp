// Errors of a computed result against the exact one, and the classical and
// probabilistic rounding-error bounds for inner products, so experiments can
// plot measured errors beside them.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <span>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim {

// Unit roundoff of a format: 2^-p for round-to-nearest, 2^(1-p) otherwise
// (directed and stochastic rounding), p = man_bits + 1.
double unit_roundoff(const Format& fmt, RoundingMode mode = RoundingMode::nearest_even);

// gamma_n = n*u / (1 - n*u) (Higham, ASNA 2002, Lemma 3.1); +inf when n*u >= 1.
double gamma_n(std::size_t n, double u);
// The probabilistic bound of Higham & Mary (SISC 2019, Theorem 3.1):
// gamma~_n(lambda) = exp(lambda*sqrt(n)*u + n*u^2/(1-u)) - 1 ~ lambda*sqrt(n)*u,
// holding with probability at least 1 - 2n*exp(-lambda^2 (1-u)^2 / 2).
double probabilistic_gamma_n(std::size_t n, double u, double lambda = 1.0);

// The spacing of `fmt` at |x| (ulp(x)): 2^(max(e, emin) - man_bits).
double ulp(const Format& fmt, double x);
// |computed - exact| / ulp(exact) in `fmt` (0 when equal; +inf on non-finite mismatch).
double error_in_ulps(const Format& fmt, double computed, double exact);

// sum |a_i b_i| / |sum a_i b_i| (+inf for a zero sum with a non-zero term).
double dot_condition_number(std::span<const double> a, std::span<const double> b);

struct ErrorStats {
  std::size_t count = 0;
  double max_abs = 0, mean_abs = 0;
  double max_rel = 0, mean_rel = 0;    // over elements with a non-zero exact value
  double max_ulps = 0, mean_ulps = 0;  // in ulps of the output format
};

// Element-wise comparison of computed with exact (same shape, else
// std::invalid_argument naming the shapes); ulps measured in `out`.
ErrorStats compare(const Eigen::MatrixXd& computed, const Eigen::MatrixXd& exact, const Format& out);
ErrorStats compare(std::span<const double> computed, std::span<const double> exact, const Format& out);

// Forward error bound |s - s^| <= gamma_n(u) * sum|a_i b_i| for recursive
// summation of n products (Higham, ASNA eq. 3.5) and its probabilistic twin.
double dot_error_bound(std::span<const double> a, std::span<const double> b, double u);
double dot_probabilistic_error_bound(std::span<const double> a, std::span<const double> b, double u,
                                     double lambda = 1.0);

}  // namespace rpsim::sim
