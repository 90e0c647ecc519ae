// The summation algorithms of accumulation.hpp (sequential, fused,
// pairwise, blocked, Kahan, exact, Eigen's dot, the Tensor Core chain) on a
// strided pair of operands. Internal to sim/accumulation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rpsim/accumulation/accumulation.hpp"

namespace rpsim::sim::acc_detail {

// Strided view of the two operands.
struct Operands {
  const double* a;
  std::ptrdiff_t as;
  const double* b;
  std::ptrdiff_t bs;
  std::size_t k;
  double x(std::size_t i) const { return a[static_cast<std::ptrdiff_t>(i) * as]; }
  double y(std::size_t i) const { return b[static_cast<std::ptrdiff_t>(i) * bs]; }
};

double sequential(const Sequential& m, const Operands& o, double c, std::uint64_t stream);
double pairwise(const Pairwise& m, const Operands& o, double c, std::uint64_t stream);
double blocked(const Blocked& m, const Operands& o, double c, std::uint64_t stream);
double kahan(const Kahan& m, const Operands& o, double c, std::uint64_t stream);
double exact(const Exact& m, const Operands& o, double c);
// Eigen's vectorised inner product, then + c (see EigenGemm).
double eigen_dot(const Operands& o, double c);
double tensor_core(const TensorCoreModel& m, const Operands& o, double c);

}  // namespace rpsim::sim::acc_detail
