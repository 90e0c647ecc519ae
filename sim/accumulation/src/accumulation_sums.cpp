// The summation algorithms behind AccumulationModel::dot (accumulation_sums.hpp).
#include "accumulation_sums.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "accumulation_arith.hpp"
#include "rpsim/accumulation/exact_accumulator.hpp"

namespace rpsim::sim::acc_detail {

namespace {

// Stochastic draws: products use even indices, additions odd ones.
constexpr std::uint64_t product_index(std::size_t i) {
  return 2 * i;
}
constexpr std::uint64_t sum_index(std::size_t i) {
  return 2 * i + 1;
}

// Pairwise summation of p[lo, hi): the two halves summed recursively, then
// added (Higham, ASNA Sec. 4.1). Draws keyed by the node's first index and size.
double pairwise_sum(const Arith& ar, const std::vector<double>& p, std::size_t lo, std::size_t hi) {
  if (hi - lo == 1) return p[lo];
  const std::size_t mid = lo + (hi - lo) / 2;
  const double left = pairwise_sum(ar, p, lo, mid);
  const double right = pairwise_sum(ar, p, mid, hi);
  return ar.add(left, right, sum_index(lo) ^ (static_cast<std::uint64_t>(hi - lo) << 40));
}

std::vector<double> rounded_products(const Arith& ar, const Operands& o) {
  std::vector<double> p(o.k);
  for (std::size_t i = 0; i < o.k; ++i) p[i] = ar.mul(o.x(i), o.y(i), product_index(i));
  return p;
}

}  // namespace

double sequential(const Sequential& m, const Operands& o, double c, std::uint64_t stream) {
  const Arith ar(m.acc, stream);
  // The unfused sum is the shared code's (accumulator_ops.hpp: the CUDA
  // backend's sequential GEMM runs it too).
  if (!m.fused) return acc_detail::sequential(ar.ops(), o.a, o.as, o.b, o.bs, o.k, c);
  double s = ar.round(c, sum_index(o.k));
  for (std::size_t i = 0; i < o.k; ++i) s = ar.fma(o.x(i), o.y(i), s, sum_index(i));
  return s;
}

double pairwise(const Pairwise& m, const Operands& o, double c, std::uint64_t stream) {
  const Arith ar(m.acc, stream);
  const double cc = ar.round(c, sum_index(o.k) + 1);
  if (o.k == 0) return cc;
  const auto p = rounded_products(ar, o);
  return ar.add(pairwise_sum(ar, p, 0, p.size()), cc, sum_index(o.k));
}

// Blocked summation (Blanchard, Higham & Mary, SISC 2020, Alg. 3.1): recursive
// summation inside each block of b products, the block sums added recursively.
double blocked(const Blocked& m, const Operands& o, double c, std::uint64_t stream) {
  const Arith ar(m.acc, stream);
  const std::size_t b = static_cast<std::size_t>(m.block);
  double total = ar.round(c, sum_index(o.k));
  for (std::size_t start = 0; start < o.k; start += b) {
    const std::size_t end = std::min(o.k, start + b);
    double s = ar.mul(o.x(start), o.y(start), product_index(start));
    for (std::size_t i = start + 1; i < end; ++i)
      s = ar.add(s, ar.mul(o.x(i), o.y(i), product_index(i)), sum_index(i));
    total = ar.add(total, s, sum_index(start) ^ (1ull << 62));
  }
  return total;
}

// Kahan's compensated summation (Higham, ASNA Alg. 4.2) of the rounded products.
double kahan(const Kahan& m, const Operands& o, double c, std::uint64_t stream) {
  const Arith ar(m.acc, stream);
  double s = ar.round(c, sum_index(o.k));
  double comp = 0;
  for (std::size_t i = 0; i < o.k; ++i) {
    const double p = ar.mul(o.x(i), o.y(i), product_index(i));
    const std::uint64_t base = 4 * static_cast<std::uint64_t>(i) + (1ull << 61);
    const double y = ar.sub(p, comp, base);
    const double t = ar.add(s, y, base + 1);
    comp = ar.sub(ar.sub(t, s, base + 2), y, base + 3);
    s = t;
  }
  return s;
}

double exact(const Exact& m, const Operands& o, double c) {
  ExactAccumulator acc;
  for (std::size_t i = 0; i < o.k; ++i) acc.add_product(o.x(i), o.y(i));
  acc.add(c);
  Rounding r;
  r.mode = m.rounding;
  Flags f = 0;
  return to_double(m.output, acc.round(m.output, r, f));
}

double eigen_dot(const Operands& o, double c) {
  if (o.k == 0) return c;
  using Strided = Eigen::Map<const Eigen::VectorXd, 0, Eigen::InnerStride<>>;
  const auto k = static_cast<Eigen::Index>(o.k);
  return Strided(o.a, k, Eigen::InnerStride<>(o.as)).dot(Strided(o.b, k, Eigen::InnerStride<>(o.bs))) + c;
}

double tensor_core(const TensorCoreModel& m, const Operands& o, double c) {
  std::vector<double> a(o.k), b(o.k);
  for (std::size_t i = 0; i < o.k; ++i) {
    a[i] = o.x(i);
    b[i] = o.y(i);
  }
  return tensor_core_dot(m, a, b, c);
}

}  // namespace rpsim::sim::acc_detail
