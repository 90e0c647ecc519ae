// Error measures and rounding-error bounds (see error_analysis.hpp).
#include "rpsim/accumulation/error_analysis.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "rpsim/accumulation/exact_accumulator.hpp"

namespace rpsim::sim {

double unit_roundoff(const Format& fmt, RoundingMode mode) {
  const bool nearest = mode == RoundingMode::nearest_even || mode == RoundingMode::nearest_away;
  return std::ldexp(1.0, nearest ? -fmt.precision() : 1 - fmt.precision());
}

double gamma_n(std::size_t n, double u) {
  const double nu = static_cast<double>(n) * u;
  if (nu >= 1) return std::numeric_limits<double>::infinity();
  return nu / (1 - nu);
}

double probabilistic_gamma_n(std::size_t n, double u, double lambda) {
  const double nd = static_cast<double>(n);
  return std::expm1(lambda * std::sqrt(nd) * u + nd * u * u / (1 - u));
}

double ulp(const Format& fmt, double x) {
  const double ax = std::fabs(x);
  int e = fmt.emin;
  if (ax != 0 && std::isfinite(ax)) e = std::max(std::ilogb(ax), fmt.emin);
  return std::ldexp(1.0, e - fmt.man_bits);
}

double error_in_ulps(const Format& fmt, double computed, double exact) {
  if (computed == exact) return 0;
  if (!std::isfinite(computed) || !std::isfinite(exact)) return std::numeric_limits<double>::infinity();
  // The difference of two doubles as an exact sum, rounded once.
  ExactAccumulator acc;
  acc.add(computed);
  acc.add(-exact);
  return std::fabs(acc.value()) / ulp(fmt, exact);
}

double dot_condition_number(std::span<const double> a, std::span<const double> b) {
  if (a.size() != b.size()) throw std::invalid_argument("dot_condition_number: a and b differ in length");
  ExactAccumulator s, abs_s;
  for (std::size_t i = 0; i < a.size(); ++i) {
    s.add_product(a[i], b[i]);
    abs_s.add_product(std::fabs(a[i]), std::fabs(b[i]));
  }
  const double num = abs_s.value(), den = std::fabs(s.value());
  if (num == 0) return 1;
  return den == 0 ? std::numeric_limits<double>::infinity() : num / den;
}

namespace {

struct Accumulate {
  ErrorStats s;
  std::size_t rel_count = 0;
  void add(double computed, double exact, const Format& out) {
    ++s.count;
    double abs_err;
    if (computed == exact) {
      abs_err = 0;
    } else if (!std::isfinite(computed) || !std::isfinite(exact)) {
      abs_err = std::numeric_limits<double>::infinity();
    } else {
      ExactAccumulator acc;
      acc.add(computed);
      acc.add(-exact);
      abs_err = std::fabs(acc.value());
    }
    s.max_abs = std::max(s.max_abs, abs_err);
    s.mean_abs += abs_err;
    const double ulps = error_in_ulps(out, computed, exact);
    s.max_ulps = std::max(s.max_ulps, ulps);
    s.mean_ulps += ulps;
    if (exact != 0) {
      const double rel = abs_err / std::fabs(exact);
      s.max_rel = std::max(s.max_rel, rel);
      s.mean_rel += rel;
      ++rel_count;
    }
  }
  ErrorStats finish() {
    if (s.count) {
      s.mean_abs /= static_cast<double>(s.count);
      s.mean_ulps /= static_cast<double>(s.count);
    }
    if (rel_count) s.mean_rel /= static_cast<double>(rel_count);
    return s;
  }
};

}  // namespace

ErrorStats compare(const Eigen::MatrixXd& computed, const Eigen::MatrixXd& exact, const Format& out) {
  if (computed.rows() != exact.rows() || computed.cols() != exact.cols())
    throw std::invalid_argument(fmt::format("compare: computed is {}x{} but exact is {}x{}", computed.rows(),
                                            computed.cols(), exact.rows(), exact.cols()));
  Accumulate acc;
  for (Eigen::Index i = 0; i < computed.size(); ++i) acc.add(computed.data()[i], exact.data()[i], out);
  return acc.finish();
}

ErrorStats compare(std::span<const double> computed, std::span<const double> exact, const Format& out) {
  if (computed.size() != exact.size())
    throw std::invalid_argument(
        fmt::format("compare: {} computed values but {} exact ones", computed.size(), exact.size()));
  Accumulate acc;
  for (std::size_t i = 0; i < computed.size(); ++i) acc.add(computed[i], exact[i], out);
  return acc.finish();
}

double dot_error_bound(std::span<const double> a, std::span<const double> b, double u) {
  if (a.size() != b.size()) throw std::invalid_argument("dot_error_bound: a and b differ in length");
  ExactAccumulator abs_s;
  for (std::size_t i = 0; i < a.size(); ++i) abs_s.add_product(std::fabs(a[i]), std::fabs(b[i]));
  return gamma_n(a.size(), u) * abs_s.value(RoundingMode::up);
}

double dot_probabilistic_error_bound(std::span<const double> a, std::span<const double> b, double u,
                                     double lambda) {
  if (a.size() != b.size())
    throw std::invalid_argument("dot_probabilistic_error_bound: a and b differ in length");
  ExactAccumulator abs_s;
  for (std::size_t i = 0; i < a.size(); ++i) abs_s.add_product(std::fabs(a[i]), std::fabs(b[i]));
  return probabilistic_gamma_n(a.size(), u, lambda) * abs_s.value(RoundingMode::up);
}

}  // namespace rpsim::sim
