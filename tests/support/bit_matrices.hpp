// Matrices for bit-exact GEMM tests: random entries of a format, bit
// comparison, the per-element dot product as the reference product, runs at
// one and two threads. Shared by the accumulation library's tests of its
// native kernels and the trainer's tests of its matmul.
#pragma once

#include <omp.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <span>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/formats/array.hpp"
#include "rpsim/formats/random.hpp"

namespace rpsim::test {

using BitMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic>;

// Entries of both signs, magnitudes [0.5, 1) * 2^e with e uniform in
// [e_lo, e_hi], one in eight an exact zero; rounded to `fmt` (nearest even).
inline BitMatrix random_matrix(const Format& fmt, Eigen::Index r, Eigen::Index c, std::uint64_t stream,
                               int e_lo, int e_hi) {
  BitMatrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const std::uint64_t bits = counter_random(11, stream, std::uint64_t(i));
    const double mant = 0.5 + double(bits >> 11) * 0x1.0p-54;
    const int e = e_lo + int((bits >> 4) % std::uint64_t(e_hi - e_lo + 1));
    m.data()[i] = (bits & 7) == 0 ? 0.0 : ((bits & 8) ? -1 : 1) * std::ldexp(mant, e);
  }
  const std::span<double> all(m.data(), std::size_t(m.size()));
  round_values(fmt, all, all);
  return m;
}

inline bool same_bits(const BitMatrix& x, const BitMatrix& y) {
  if (x.rows() != y.rows() || x.cols() != y.cols()) return false;
  for (Eigen::Index i = 0; i < x.size(); ++i)
    if (std::bit_cast<std::uint64_t>(x.data()[i]) != std::bit_cast<std::uint64_t>(y.data()[i])) return false;
  return true;
}

// The same bits, except that any NaN equals any NaN: its sign and payload
// are not part of the models.
inline bool same_bits_or_nan(const BitMatrix& x, const BitMatrix& y) {
  if (x.rows() != y.rows() || x.cols() != y.cols()) return false;
  for (Eigen::Index i = 0; i < x.size(); ++i)
    if (std::bit_cast<std::uint64_t>(x.data()[i]) != std::bit_cast<std::uint64_t>(y.data()[i]) &&
        !(std::isnan(x.data()[i]) && std::isnan(y.data()[i])))
      return false;
  return true;
}

// D = A B + C one element at a time, each the model's own dot product from
// c(i, j) (stream i*n + j, as sim::gemm keys them): the definition the fast
// paths are held to.
inline BitMatrix dot_product_gemm(const sim::AccumulationModel& model, const BitMatrix& a, const BitMatrix& b,
                                  const BitMatrix& c) {
  BitMatrix d(a.rows(), b.cols());
  for (Eigen::Index i = 0; i < a.rows(); ++i) {
    const BitMatrix row = a.row(i).transpose();
    for (Eigen::Index j = 0; j < b.cols(); ++j)
      d(i, j) = model.dot_strided(row.data(), 1, b.col(j).data(), 1, std::size_t(a.cols()), c(i, j),
                                  std::uint64_t(i) * std::uint64_t(b.cols()) + std::uint64_t(j));
  }
  return d;
}

inline BitMatrix dot_product_gemm(const sim::AccumulationModel& model, const BitMatrix& a,
                                  const BitMatrix& b) {
  return dot_product_gemm(model, a, b, BitMatrix::Zero(a.rows(), b.cols()));
}

// Runs f with 1 and with 2 OpenMP threads; both results must be identical.
template <class F>
BitMatrix with_1_and_2_threads(F f) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const BitMatrix one = f();
  omp_set_num_threads(2);
  const BitMatrix two = f();
  omp_set_num_threads(saved);
  REQUIRE(same_bits(one, two));
  return one;
}

}  // namespace rpsim::test
