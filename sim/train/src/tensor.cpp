// Rounding of whole tensors and matmuls under an accumulation model.
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <variant>
#include <vector>

#include "rpsim/formats/random.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/train/tensor.hpp"

namespace rpsim::sim::train {
namespace {

enum class FastKind { identity, binary32, grid, none };

FastKind fast_kind(const Format& fmt) {
  if (fmt == formats::binary64()) return FastKind::identity;
  if (fmt == formats::binary32()) return FastKind::binary32;
  if (fmt.has_sign && fmt.has_zero && fmt.subnormals && fmt.man_bits <= 50 && fmt.emin > -1000 &&
      fmt.emax < 1000)
    return FastKind::grid;
  return FastKind::none;
}

double pow2(int k) {
  return std::bit_cast<double>(std::uint64_t(1023 + k) << 52);
}

double exact_round(const Format& fmt, double x) {
  return to_double(fmt, round_double(fmt, x));
}

// Round to nearest even on the grid of the format: the quantum of x's binade
// (or of the subnormal range) is 2^(max(E, emin) - man_bits); x scaled by its
// inverse is rounded to an integer with the 2^52 trick, which is exact RNE
// for magnitudes below 2^52. Results beyond the largest finite value, and
// NaN/infinity, go to the exact core so overflow follows the format's rules.
double grid_round(const Format& fmt, double x) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const int biased = int((bits >> 52) & 0x7ff);
  if (biased == 0x7ff) return exact_round(fmt, x);
  if (x == 0) return x;
  const int e = biased == 0 ? -1022 : biased - 1023;
  const int q = (e > fmt.emin ? e : fmt.emin) - fmt.man_bits;
  const double t = std::fabs(x) * pow2(-q);
  const double big = 4503599627370496.0;  // 2^52
  const double r = (t + big) - big;       // not folded: no -ffast-math in this build
  const double y = std::copysign(r * pow2(q), x);
  if (std::fabs(y) > fmt.max_finite()) return exact_round(fmt, x);
  return y;
}

}  // namespace

double round_value(const Format& fmt, double x) {
  switch (fast_kind(fmt)) {
    case FastKind::identity: return x;
    case FastKind::binary32: return double(float(x));
    case FastKind::grid: return grid_round(fmt, x);
    case FastKind::none: break;
  }
  return exact_round(fmt, x);
}

double round_value(const Format& fmt, double x, RoundingMode mode, std::uint64_t random_bits) {
  if (mode == RoundingMode::nearest_even) return round_value(fmt, x);
  Rounding r;
  r.mode = mode;
  r.random_bits = random_bits;
  Flags flags = 0;
  return to_double(fmt, round_double(fmt, x, r, flags));
}

void round_in_place(const Format& fmt, Matrix& m, RoundingMode mode, RandomStream random) {
  double* p = m.data();
  const Eigen::Index n = m.size();
  if (mode == RoundingMode::nearest_even) {
    switch (fast_kind(fmt)) {
      case FastKind::identity: return;
      case FastKind::binary32:
        for (Eigen::Index i = 0; i < n; ++i) p[i] = double(float(p[i]));
        return;
      case FastKind::grid:
#pragma omp parallel for schedule(static) if (n > 65536)
        for (Eigen::Index i = 0; i < n; ++i) p[i] = grid_round(fmt, p[i]);
        return;
      case FastKind::none: break;
    }
    for (Eigen::Index i = 0; i < n; ++i) p[i] = exact_round(fmt, p[i]);
    return;
  }
#pragma omp parallel for schedule(static) if (n > 65536)
  for (Eigen::Index i = 0; i < n; ++i)
    p[i] = round_value(fmt, p[i], mode, counter_random(random.seed, random.stream, std::uint64_t(i)));
}

Matrix rounded(const Format& fmt, const Matrix& m, RoundingMode mode, RandomStream random) {
  Matrix r = m;
  round_in_place(fmt, r, mode, random);
  return r;
}

namespace {

// Every entry a binary32 value (or not finite): float(x) loses nothing.
bool all_binary32(const Matrix& m) {
  const double* p = m.data();
  for (Eigen::Index i = 0; i < m.size(); ++i)
    if (double(float(p[i])) != p[i] && !std::isnan(p[i])) return false;
  return true;
}

// The accumulator of a sequential, not fused, round-to-nearest-even model.
const Format* sequential_rne(const sim::AccumulationModel& model) {
  const auto* seq = std::get_if<sim::Sequential>(&model.variant());
  if (!seq || seq->fused || seq->acc.rounding != RoundingMode::nearest_even) return nullptr;
  return &seq->acc.format;
}

// Recursive summation in float, row by row with the K loop outside the
// vectorised j loop: every c(i, j) is still acc = acc + a(i,p)*b(p,j) in
// index order p = 0, 1, ..., each operation rounded to binary32.
Matrix matmul_binary32(const Matrix& a, const Matrix& b) {
  const Eigen::Index m = a.rows(), k = a.cols(), n = b.cols();
  std::vector<float> af(std::size_t(m * k)), bf(std::size_t(k * n));
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index p = 0; p < k; ++p) af[std::size_t(i * k + p)] = float(a(i, p));
  for (Eigen::Index p = 0; p < k; ++p)
    for (Eigen::Index j = 0; j < n; ++j) bf[std::size_t(p * n + j)] = float(b(p, j));
  Matrix c(m, n);
#pragma omp parallel
  {
    std::vector<float> row(static_cast<std::size_t>(n));
#pragma omp for schedule(static)
    for (Eigen::Index i = 0; i < m; ++i) {
      float* acc = row.data();
      for (Eigen::Index j = 0; j < n; ++j) acc[j] = 0.0f;
      const float* arow = af.data() + i * k;
      for (Eigen::Index p = 0; p < k; ++p) {
        const float x = arow[p];
        const float* brow = bf.data() + p * n;
#pragma omp simd
        for (Eigen::Index j = 0; j < n; ++j) acc[j] += x * brow[j];
      }
      for (Eigen::Index j = 0; j < n; ++j) c(i, j) = double(acc[j]);
    }
  }
  return c;
}

// Recursive summation rounded to `fmt` (a grid format with at most 25
// significand bits) on binary64 arithmetic: with binary32 operands a*b is
// exact in binary64, so grid_round(a*b) is the product rounded once; acc and
// the rounded product are values of fmt, and rounding their binary64 sum to
// fmt equals rounding the exact sum because 53 >= 2p + 2 (double rounding is
// innocuous: Figueroa, "When is double rounding innocuous?", 1995).
Matrix matmul_grid(const Matrix& a, const Matrix& b, const Format& fmt) {
  const Eigen::Index m = a.rows(), k = a.cols(), n = b.cols();
  Matrix c(m, n);
#pragma omp parallel
  {
    std::vector<double> row(static_cast<std::size_t>(k));
#pragma omp for schedule(static)
    for (Eigen::Index i = 0; i < m; ++i) {
      for (Eigen::Index p = 0; p < k; ++p) row[std::size_t(p)] = a(i, p);
      for (Eigen::Index j = 0; j < n; ++j) {
        const double* col = b.col(j).data();
        double acc = 0.0;
        for (Eigen::Index p = 0; p < k; ++p)
          acc = grid_round(fmt, acc + grid_round(fmt, row[std::size_t(p)] * col[p]));
        c(i, j) = acc;
      }
    }
  }
  return c;
}

// The model with its stochastic-rounding seed mixed with `random`.
sim::AccumulationModel reseeded(const sim::AccumulationModel& model, RandomStream random) {
  if (random.seed == 0 && random.stream == 0) return model;
  sim::AccumulationModel::Variant v = model.variant();
  std::visit(
      [&](auto& m) {
        if constexpr (requires { m.acc.seed; }) {
          if (m.acc.rounding == RoundingMode::stochastic)
            m.acc.seed = counter_random(m.acc.seed, random.seed, random.stream);
        }
      },
      v);
  return sim::AccumulationModel(std::move(v));
}

}  // namespace

Matrix matmul(const Matrix& a, const Matrix& b, const sim::AccumulationModel& model, RandomStream random) {
  if (a.cols() != b.rows())
    throw std::invalid_argument("matmul: inner dimensions differ (" + std::to_string(a.cols()) + " vs " +
                                std::to_string(b.rows()) + ")");
  if (const Format* acc = sequential_rne(model); acc && all_binary32(a) && all_binary32(b)) {
    if (*acc == formats::binary32()) return matmul_binary32(a, b);
    if (fast_kind(*acc) == FastKind::grid && acc->man_bits <= 24) return matmul_grid(a, b, *acc);
  }
  const sim::GemmOptions options{omp_get_max_threads()};
  if (const auto* tc = std::get_if<sim::TensorCoreModel>(&model.variant()))
    return sim::gemm(model, rounded(tc->input, a), rounded(tc->input, b), options);
  return sim::gemm(reseeded(model, random), a, b, options);
}

Mask flushed_mask(const Matrix& before, const Matrix& after) {
  if (before.rows() != after.rows() || before.cols() != after.cols())
    throw std::invalid_argument("flushed_mask: shapes differ");
  return before.array() != 0.0 && after.array() == 0.0;
}

std::int64_t count_flushed(const Matrix& before, const Matrix& after) {
  return std::int64_t(flushed_mask(before, after).count());
}

double sequential_sum(const Format& fmt, const double* values, Eigen::Index count, Eigen::Index stride) {
  if (count == 0) return 0.0;
  double acc = values[0];
  for (Eigen::Index i = 1; i < count; ++i) acc = round_value(fmt, acc + values[i * stride]);
  return acc;
}

}  // namespace rpsim::sim::train
