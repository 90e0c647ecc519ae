// FP8 block scaling's GEMM (gemm.hpp gemm_blockwise): the per-tile
// products of the model, folded with their binary32 scales in cuBLAS's order.
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "rpsim/accumulation/gemm.hpp"

namespace rpsim::sim {

namespace {

float f32(double v) {
  return static_cast<float>(v);  // the values are binary32 already; a NaN stays NaN
}

// One fused step of the fold: y + p * s, rounded once (fmaf is correctly rounded).
float fold(float y, float partial, float sa, float sb, bool a_2d, bool b_2d) {
  if (a_2d && b_2d) return std::fma(partial, sa * sb, y);
  if (a_2d) return std::fma(partial * sb, sa, y);
  return std::fma(partial * sa, sb, y);
}

}  // namespace

Matrix gemm_blockwise(const AccumulationModel& model, const Matrix& a, const Matrix& b,
                      const BlockwiseScales& s, const Format& output, const Matrix* c,
                      const GemmOptions& options) {
  const Eigen::Index m = a.rows(), k = a.cols(), n = b.cols();
  if (b.rows() != k)
    throw std::invalid_argument(
        fmt::format("gemm_blockwise: inner dimensions differ ({} vs {})", k, b.rows()));
  if (s.tile_k < 1)
    throw std::invalid_argument(fmt::format("gemm_blockwise: tile_k {} (at least 1)", s.tile_k));
  const Eigen::Index tiles = (k + s.tile_k - 1) / s.tile_k;
  if (s.sa.rows() != m || s.sa.cols() != tiles)
    throw std::invalid_argument(fmt::format("gemm_blockwise: SA is {}x{}, expected {}x{} (M x K/{})",
                                            s.sa.rows(), s.sa.cols(), m, tiles, s.tile_k));
  if (s.sb.rows() != tiles || s.sb.cols() != n)
    throw std::invalid_argument(fmt::format("gemm_blockwise: SB is {}x{}, expected {}x{} (K/{} x N)",
                                            s.sb.rows(), s.sb.cols(), tiles, n, s.tile_k));
  if (c && (c->rows() != m || c->cols() != n))
    throw std::invalid_argument(
        fmt::format("gemm_blockwise: C is {}x{}, expected {}x{}", c->rows(), c->cols(), m, n));
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic> y =
      Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>::Zero(m, n);
  for (Eigen::Index t = 0; t < tiles; ++t) {
    const Eigen::Index k0 = t * s.tile_k, len = std::min<Eigen::Index>(s.tile_k, k - k0);
    const Matrix p = gemm(model, a.middleCols(k0, len), b.middleRows(k0, len), options);
    for (Eigen::Index j = 0; j < n; ++j)
      for (Eigen::Index i = 0; i < m; ++i)
        y(i, j) = fold(y(i, j), f32(p(i, j)), f32(s.sa(i, t)), f32(s.sb(t, j)), s.a_2d, s.b_2d);
  }
  Matrix d = round_to_format(y.cast<double>(), output);
  if (!c) return d;
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < m; ++i) d(i, j) = double(f32(d(i, j)) + f32((*c)(i, j)));  // binary32 add
  return round_to_format(d, output);
}

}  // namespace rpsim::sim
