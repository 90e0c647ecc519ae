// The native GEMMs' packing copies (native_gemm.cpp). A block of A (kRows
// rows) and a panel of B are stored p-major, so where the operand given runs
// along p (A^T given, or a column-major B) packing interleaves several runs
// into one: dst[p * stride + r] = src_r[p]. Run by run, that was one store
// per element at a stride (pack_a of A^T was 5.7% of a ResNet-style step with
// the FP64 shadow, 2026-12-01); four runs at a time it is a 4x4 transpose in
// registers and one contiguous store of four per p. Only copies and exact
// conversions (the packings check the values first): the same bits in C.
#pragma once

#include <immintrin.h>

#include <type_traits>

#include <Eigen/Core>

#include "rpsim/accumulation/native_gemm.hpp"
#include "rpsim/formats/cpu_features.hpp"

namespace rpsim::sim::native {
namespace {

// dst[p * stride + r] = T(src[r][p]) for from <= p < k, r < 4.
template <class T>
[[gnu::always_inline]] inline void interleave4_loop(const double* const* src, T* dst, Eigen::Index from,
                                                    Eigen::Index k, Eigen::Index stride) {
  for (Eigen::Index p = from; p < k; ++p)
    for (int r = 0; r < 4; ++r) dst[p * stride + r] = T(src[r][p]);
}

template <class T>
void interleave4_portable(const double* const* src, T* dst, Eigen::Index k, Eigen::Index stride) {
  interleave4_loop(src, dst, 0, k, stride);
}

// Four p at a time: rows (src[r][p..p+3]) unpacked pairwise within 128-bit
// lanes, then the lanes swapped, give the columns (src[0..3][p + j]).
template <class T>
__attribute__((target("avx2"))) void interleave4_avx2(const double* const* src, T* dst, Eigen::Index k,
                                                      Eigen::Index stride) {
  Eigen::Index p = 0;
  for (; p + 4 <= k; p += 4) {
    const __m256d v0 = _mm256_loadu_pd(src[0] + p), v1 = _mm256_loadu_pd(src[1] + p),
                  v2 = _mm256_loadu_pd(src[2] + p), v3 = _mm256_loadu_pd(src[3] + p);
    const __m256d lo01 = _mm256_unpacklo_pd(v0, v1), hi01 = _mm256_unpackhi_pd(v0, v1),
                  lo23 = _mm256_unpacklo_pd(v2, v3), hi23 = _mm256_unpackhi_pd(v2, v3);
    const __m256d column[4] = {
        _mm256_permute2f128_pd(lo01, lo23, 0x20), _mm256_permute2f128_pd(hi01, hi23, 0x20),
        _mm256_permute2f128_pd(lo01, lo23, 0x31), _mm256_permute2f128_pd(hi01, hi23, 0x31)};
    for (int j = 0; j < 4; ++j) {
      T* out = dst + (p + j) * stride;
      if constexpr (std::is_same_v<T, double>)
        _mm256_storeu_pd(out, column[j]);
      else
        _mm_storeu_ps(out, _mm256_cvtpd_ps(column[j]));  // exact: the values were checked
    }
  }
  interleave4_loop(src, dst, p, k, stride);
}

// The widest of the two this CPU runs, chosen once.
template <class T>
void interleave4(const double* const* src, T* dst, Eigen::Index k, Eigen::Index stride) {
  static const auto run = cpu_features().avx2 ? &interleave4_avx2<T> : &interleave4_portable<T>;
  run(src, dst, k, stride);
}

// Where given(i, j) lies, without Eigen's index assertion: a stretch may
// start at row 0 of a matrix with no rows (nothing is then read).
inline const double* column_at(const Matrix& given, Eigen::Index i, Eigen::Index j) {
  return given.data() + i + j * given.rows();
}

// dst[i * stride] = T(src[i]) for i < n (the values checked by packable).
template <class T>
inline void convert_run(const double* src, T* dst, Eigen::Index n, Eigen::Index stride) {
  for (Eigen::Index i = 0; i < n; ++i) dst[i * stride] = T(src[i]);
}

// dst[p * stride + r] = T(given(p, j0 + r)) for p < k, r < count: the columns
// j0.. of `given` (each a run along p) interleaved, four at a time
// (interleave4), the rest run by run.
template <class T>
void convert_runs(const Matrix& given, Eigen::Index j0, Eigen::Index count, T* dst, Eigen::Index k,
                  Eigen::Index stride) {
  Eigen::Index r = 0;
  for (; r + 4 <= count; r += 4) {
    const double* src[4] = {column_at(given, 0, j0 + r), column_at(given, 0, j0 + r + 1),
                            column_at(given, 0, j0 + r + 2), column_at(given, 0, j0 + r + 3)};
    interleave4(src, dst + r, k, stride);
  }
  for (; r < count; ++r) convert_run(column_at(given, 0, j0 + r), dst + r, k, stride);
}

}  // namespace
}  // namespace rpsim::sim::native
