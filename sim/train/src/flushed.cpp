// The entries a rounding flushed to zero (tensor.hpp: flushed_mask,
// count_flushed) and the scope in which nothing can be (ScopedNothingFlushed).
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "count_where.hpp"
#include "rpsim/formats/cpu_features.hpp"
#include "rpsim/train/tensor.hpp"

namespace rpsim::sim::train {

namespace {
thread_local bool nothing_flushed = false;
}  // namespace

ScopedNothingFlushed::ScopedNothingFlushed() : saved_(nothing_flushed) {
  nothing_flushed = true;
}

ScopedNothingFlushed::~ScopedNothingFlushed() {
  nothing_flushed = saved_;
}

namespace {

// o[i] = x[i] != 0 and y[i] == 0 (a NaN x counts as nonzero, a NaN y is not
// zero), i < n. The plain loop stayed scalar in GCC's SSE2 code (a store of
// a bool per compared pair: 1.2 ns an entry, 12% of a GPT-style 256x64x256
// GEMM op's backward); in AVX2, four entries a compare, their mask bits
// widened to four bool bytes by a table.
void flushed_scalar(const double* x, const double* y, bool* o, Eigen::Index n) {
  for (Eigen::Index i = 0; i < n; ++i) o[i] = (x[i] != 0.0) & (y[i] == 0.0);
}

constexpr std::array<std::uint32_t, 16> kBoolBytes = [] {
  std::array<std::uint32_t, 16> t{};
  for (std::uint32_t m = 0; m < 16; ++m)
    for (int j = 0; j < 4; ++j) t[m] |= ((m >> j) & 1u) << (8 * j);
  return t;
}();

__attribute__((target("avx2"))) void flushed_avx2(const double* x, const double* y, bool* o, Eigen::Index n) {
  const __m256d zero = _mm256_setzero_pd();
  Eigen::Index i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d nonzero = _mm256_cmp_pd(_mm256_loadu_pd(x + i), zero, _CMP_NEQ_UQ);
    const __m256d zeroed = _mm256_cmp_pd(_mm256_loadu_pd(y + i), zero, _CMP_EQ_OQ);
    std::memcpy(o + i, &kBoolBytes[std::size_t(_mm256_movemask_pd(_mm256_and_pd(nonzero, zeroed)))], 4);
  }
  flushed_scalar(x + i, y + i, o + i, n - i);
}

}  // namespace

Mask flushed_mask(const Matrix& before, const Matrix& after) {
  if (before.rows() != after.rows() || before.cols() != after.cols())
    throw std::invalid_argument("flushed_mask: shapes differ");
  if (nothing_flushed) return Mask::Constant(before.rows(), before.cols(), false);
  Mask out(before.rows(), before.cols());
  (cpu_features().avx2 ? flushed_avx2 : flushed_scalar)(before.data(), after.data(), out.data(),
                                                        before.size());
  return out;
}

std::int64_t count_flushed(const Matrix& before, const Matrix& after) {
  if (before.rows() != after.rows() || before.cols() != after.cols())
    throw std::invalid_argument("count_flushed: shapes differ");
  if (nothing_flushed) return 0;
  return detail::count_where(
      before.size(), [](auto x, auto y) { return (x != 0.0) & (y == 0.0); }, before.data(), after.data());
}

}  // namespace rpsim::sim::train
