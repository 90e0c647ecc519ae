// Copies between matrices at any element strides in square tiles: a
// transposing copy stays within a few cache lines a tile, where Eigen's
// transposing assignment strides through a whole side. Used by the Python
// binding (row-major torch data to the core's column-major carrier, and
// back) and by the trainer's explicit transposes.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <type_traits>

namespace rpsim::sim {

namespace detail {
// dst[a * ld + b] = src[b * ls + a] converted, for a < na, b < nb: a
// transposing copy between the source's contiguous side and the
// destination's, in AVX2 registers (tiled_copy.cpp). False, nothing copied,
// on a CPU without AVX2.
bool transposed_copy(const double* src, Eigen::Index ls, float* dst, Eigen::Index ld, Eigen::Index na,
                     Eigen::Index nb);
bool transposed_copy(const float* src, Eigen::Index ls, double* dst, Eigen::Index ld, Eigen::Index na,
                     Eigen::Index nb);
bool transposed_copy(const double* src, Eigen::Index ls, double* dst, Eigen::Index ld, Eigen::Index na,
                     Eigen::Index nb);
}  // namespace detail

// dst(i, j) = To(src(i, j)) for a rows x cols matrix at element strides
// (srs, scs) and (drs, dcs), in square tiles of kSide, each down its
// columns. In a microbenchmark of the GEMM op's shapes it is 1.2x to 7.4x
// faster than Eigen's transposing cast (8192x144 float32 to binary64: 1.35
// -> 0.72 ms; back: 3.3 -> 0.69 ms); in a whole step that is within the noise.
template <class From, class To>
inline void copy_tiled(const From* src, Eigen::Index srs, Eigen::Index scs, To* dst, Eigen::Index drs,
                       Eigen::Index dcs, Eigen::Index rows, Eigen::Index cols) {
  // A transpose (one side contiguous down the columns, the other along the
  // rows) from binary32 or binary64 to binary64, or binary64 to binary32, in
  // registers.
  if constexpr (std::is_same_v<To, double> || (std::is_same_v<To, float> && std::is_same_v<From, double>)) {
    if constexpr (std::is_same_v<From, double> || std::is_same_v<From, float>) {
      if (srs == 1 && dcs == 1 && rows > 1 && cols > 1 &&
          detail::transposed_copy(src, scs, dst, drs, rows, cols))
        return;
      if (scs == 1 && drs == 1 && rows > 1 && cols > 1 &&
          detail::transposed_copy(src, srs, dst, dcs, cols, rows))
        return;
    }
  }
  constexpr Eigen::Index kSide = 16;
  for (Eigen::Index j0 = 0; j0 < cols; j0 += kSide) {
    const Eigen::Index j1 = std::min(cols, j0 + kSide);
    for (Eigen::Index i0 = 0; i0 < rows; i0 += kSide) {
      const Eigen::Index i1 = std::min(rows, i0 + kSide);
      for (Eigen::Index j = j0; j < j1; ++j)
        for (Eigen::Index i = i0; i < i1; ++i) dst[i * drs + j * dcs] = To(src[i * srs + j * scs]);
    }
  }
}

// x^T as a new column-major matrix, by copy_tiled (the same values: a copy).
// Eigen's Matrix(x.transpose()) took 1.6-2x as long at an im2col operand's
// shapes (8192x576: 33.5 against 21.2 ms, 2048x1152: 20.3 against 10.2 ms,
// fresh pages included; 2026-12-02, Zen 5).
template <class Scalar>
Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic> transposed(
    const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>& x) {
  Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic> t(x.cols(), x.rows());
  copy_tiled(x.data(), Eigen::Index(1), x.rows(), t.data(), t.rows(), Eigen::Index(1), x.rows(), x.cols());
  return t;
}

}  // namespace rpsim::sim
