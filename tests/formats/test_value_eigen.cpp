// Eigen matrices of typed values (value.hpp as an Eigen scalar): products
// and sums round after every operation, exactly as the core would.
#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <cmath>

#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/scoped_rounding.hpp"
#include "rpsim/formats/value.hpp"
#include "value_samples.hpp"

using namespace rpsim;
using rpsim::test::random_value;

namespace {
// C = A * B by the textbook loop, rounding every product and every sum:
// c = a0*b0; c = c + a_k*b_k for k = 1.. (the order Eigen's kernels use for
// a scalar type without SIMD packets).
template <class T>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> reference_product(const Eigen::Matrix<T, -1, -1>& a,
                                                                   const Eigen::Matrix<T, -1, -1>& b) {
  const Format& f = T::format();
  const Rounding& r = rounding_environment().rounding;
  Flags fl = 0;
  Eigen::Matrix<T, -1, -1> c(a.rows(), b.cols());
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < b.cols(); ++j) {
      std::uint64_t acc = mul(f, a(i, 0).bits(), b(0, j).bits(), r, fl);
      for (Eigen::Index k = 1; k < a.cols(); ++k)
        acc = add(f, acc, mul(f, a(i, k).bits(), b(k, j).bits(), r, fl), r, fl);
      c(i, j) = T::from_bits(acc);
    }
  return c;
}

template <class T>
Eigen::Matrix<T, -1, -1> random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t salt) {
  Eigen::Matrix<T, -1, -1> m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j)
      m(i, j) = random_value<T>(salt * 1000003 + std::uint64_t(i * cols + j), 3);
  return m;
}

template <class T>
void check_product(Eigen::Index m, Eigen::Index k, Eigen::Index n) {
  const auto a = random_matrix<T>(m, k, 1 + std::uint64_t(m + k + n));
  const auto b = random_matrix<T>(k, n, 2 + std::uint64_t(m + k + n));
  const Eigen::Matrix<T, -1, -1> c = a * b;
  const auto ref = reference_product(a, b);
  std::size_t mismatches = 0;
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index j = 0; j < n; ++j) mismatches += c(i, j).bits() != ref(i, j).bits();
  INFO(m << "x" << k << " * " << k << "x" << n << " in " << T::format().name);
  CHECK(mismatches == 0);
}
}  // namespace

TEST_CASE("Eigen products and sums of typed values round after every operation", "[value][eigen]") {
  // Eigen's GEMM may split the output over OpenMP threads, which do not see
  // this thread's ScopedRounding: one thread keeps the mode honoured.
  Eigen::setNbThreads(1);
  check_product<half>(5, 7, 4);     // coefficient-based (lazy) product
  check_product<half>(24, 40, 24);  // blocked GEMM kernel
  check_product<bfloat16>(16, 33, 9);
  {
    ScopedRounding up(RoundingMode::up);
    check_product<half>(5, 7, 4);
    check_product<half>(24, 40, 24);
  }
  {
    ScopedRounding tz(RoundingMode::toward_zero);
    check_product<float8_e4m3>(6, 6, 6);
  }
  // The products above really differ from a product rounded once from the exact value.
  const auto a = random_matrix<half>(24, 40, 9), b = random_matrix<half>(40, 24, 10);
  const Eigen::Matrix<half, -1, -1> c = a * b;
  std::size_t differs = 0;
  for (Eigen::Index i = 0; i < 24; ++i)
    for (Eigen::Index j = 0; j < 24; ++j) {
      double exact = 0;  // 40 products of 11-bit values: exact in binary64 up to small rounding
      for (Eigen::Index k = 0; k < 40; ++k) exact += double(a(i, k)) * double(b(k, j));
      differs += c(i, j).bits() != half(exact).bits();
    }
  CHECK(differs > 0);

  // sum(): sequential in storage order.
  const auto s = random_matrix<half>(9, 5, 11);
  std::uint64_t acc = s(0, 0).bits();
  Flags fl = 0;
  for (Eigen::Index j = 0; j < 5; ++j)
    for (Eigen::Index i = 0; i < 9; ++i)
      if (i || j) acc = add(half::format(), acc, s(i, j).bits(), Rounding{}, fl);
  CHECK(s.sum().bits() == acc);
  // Elementwise and cwise functions found by ADL.
  const Eigen::Matrix<half, -1, -1> sq = s.cwiseAbs().cwiseSqrt();
  CHECK(sq(3, 2).bits() == sqrt(abs(s(3, 2))).bits());
  CHECK(s.cwiseAbs().maxCoeff() >= abs(s(0, 0)));
  Eigen::setNbThreads(0);
}
