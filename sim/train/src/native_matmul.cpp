// The native binary32 GEMM, register-blocked: micro-tiles of 4 rows by 16
// columns of C held in vector registers over the whole K loop, so each c(i, j)
// still sees its K terms in index order, one binary32 product and one
// binary32 addition each (rpsim_train is built with -ffp-contract=off, and
// the AVX2 clone has no FMA in its target, so acc + a*b never fuses). The
// vector width changes how many c(i, j) advance at once, never the
// operations on one. Packing converts the operands to binary32 and checks
// that the conversion loses nothing.
#include "native_matmul.hpp"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace rpsim::sim::train::detail {
namespace {

constexpr Eigen::Index kRows = 4;   // rows of a micro-tile
constexpr Eigen::Index kCols = 16;  // columns of a micro-tile: two vectors of 8
using Vec8 = float __attribute__((vector_size(32)));

// x as binary32; `exact` is cleared when that rounds (NaN converts as NaN).
inline float to_binary32(double x, bool& exact) {
  const float f = float(x);
  exact &= double(f) == x || std::isnan(x);
  return f;
}

// A in blocks of kRows rows, each stored p-major: block[p * kRows + r] =
// a(i0 + r, p); rows past the end are zero.
bool pack_a(const Matrix& a, std::vector<float>& out) {
  const Eigen::Index m = a.rows(), k = a.cols(), blocks = (m + kRows - 1) / kRows;
  out.assign(std::size_t(blocks * kRows * k), 0.0f);
  bool exact = true;
  for (Eigen::Index blk = 0; blk < blocks; ++blk) {
    float* dst = out.data() + blk * kRows * k;
    const Eigen::Index rows = std::min(kRows, m - blk * kRows);
    for (Eigen::Index p = 0; p < k; ++p)
      for (Eigen::Index r = 0; r < rows; ++r) dst[p * kRows + r] = to_binary32(a(blk * kRows + r, p), exact);
  }
  return exact;
}

// B in panels of kCols columns, each stored p-major: panel[p * kCols + c] =
// b(p, j0 + c); columns past the end are zero.
bool pack_b(const Matrix& b, std::vector<float>& out) {
  const Eigen::Index k = b.rows(), n = b.cols(), panels = (n + kCols - 1) / kCols;
  out.assign(std::size_t(panels * kCols * k), 0.0f);
  bool exact = true;
  for (Eigen::Index pan = 0; pan < panels; ++pan) {
    float* dst = out.data() + pan * kCols * k;
    const Eigen::Index cols = std::min(kCols, n - pan * kCols);
    for (Eigen::Index c = 0; c < cols; ++c)
      for (Eigen::Index p = 0; p < k; ++p) dst[p * kCols + c] = to_binary32(b(p, pan * kCols + c), exact);
  }
  return exact;
}

// One micro-tile: acc(r, c) = sum over p in order of a(r, p) * b(p, c).
[[gnu::always_inline]] inline void micro_tile(const float* a, const float* b, Eigen::Index k,
                                              float (&tile)[kRows][kCols]) {
  Vec8 acc[kRows][2] = {};
  for (Eigen::Index p = 0; p < k; ++p) {
    Vec8 b0, b1;  // (no function returns a Vec8: that would change the ABI by clone)
    std::memcpy(&b0, b + p * kCols, sizeof b0);
    std::memcpy(&b1, b + p * kCols + 8, sizeof b1);
    for (Eigen::Index r = 0; r < kRows; ++r) {
      const float x = a[p * kRows + r];
      acc[r][0] = acc[r][0] + x * b0;
      acc[r][1] = acc[r][1] + x * b1;
    }
  }
  for (Eigen::Index r = 0; r < kRows; ++r) {
    std::memcpy(&tile[r][0], &acc[r][0], sizeof(Vec8));
    std::memcpy(&tile[r][8], &acc[r][1], sizeof(Vec8));
  }
}

// Every tile, panel by panel (a panel of B stays in cache while the blocks
// of A stream past it); the AVX2 clone is chosen at load time where the CPU
// has it.
__attribute__((target_clones("avx2", "default"))) void all_tiles(const std::vector<float>& ap,
                                                                 const std::vector<float>& bp, Eigen::Index k,
                                                                 Matrix& c) {
  const Eigen::Index m = c.rows(), n = c.cols();
  const Eigen::Index blocks = (m + kRows - 1) / kRows, panels = (n + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) collapse(2)
  for (Eigen::Index pan = 0; pan < panels; ++pan)
    for (Eigen::Index blk = 0; blk < blocks; ++blk) {
      float tile[kRows][kCols];
      micro_tile(ap.data() + blk * kRows * k, bp.data() + pan * kCols * k, k, tile);
      const Eigen::Index rows = std::min(kRows, m - blk * kRows), cols = std::min(kCols, n - pan * kCols);
      for (Eigen::Index col = 0; col < cols; ++col)
        for (Eigen::Index r = 0; r < rows; ++r) c(blk * kRows + r, pan * kCols + col) = double(tile[r][col]);
    }
}

}  // namespace

std::optional<Matrix> matmul_native_binary32(const Matrix& a, const Matrix& b) {
  std::vector<float> ap, bp;
  if (!pack_a(a, ap) || !pack_b(b, bp)) return std::nullopt;
  Matrix c(a.rows(), b.cols());
  all_tiles(ap, bp, a.cols(), c);
  return c;
}

}  // namespace rpsim::sim::train::detail
