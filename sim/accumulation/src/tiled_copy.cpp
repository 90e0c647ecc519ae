// copy_tiled's transposing copies in AVX2 registers (tiled_copy.hpp): 8x8
// binary32 or 4x4 binary64 blocks loaded down the source's contiguous side,
// converted, transposed by unpacks and lane permutes, and stored along the
// destination's. The conversions are the scalar loop's instructions in
// vector form (cvtps2pd exact; cvtpd2ps the current rounding mode, as the
// scalar cast's cvtsd2ss), so the bits are copy_tiled's. The scalar tiles
// took about 3 cycles an element (the GEMM op's binary64 result to a float32
// tensor was 14% of a 256x64x256 forward).
#include "rpsim/accumulation/tiled_copy.hpp"

#include <immintrin.h>

#include <numeric>

#include "rpsim/formats/cpu_features.hpp"

namespace rpsim::sim::detail {
namespace {

using Index = Eigen::Index;

// Destination rows a tile fills side by side (each a partly written line
// until the next blocks along b complete it), as many as L1 keeps at the
// row stride: rows `bytes` apart fall in 4096 / gcd(bytes, 4096) of the 64
// sets of a 48 KiB 12-way L1 (Zen 4/5; Intel's 32-48 KiB are alike), fewer
// the more a power of two the stride is. One tile size for all strides was
// up to 6x slower than copy_tiled's scalar tiles at some stride (Zen 5,
// 2026-12-02: 32 rows at 64 KiB strides, 8192x144 float32 -> binary64
// column-major, 1.6 ms against 0.55; 8 rows everywhere was 2x slower at
// others), this about 2x faster at every shape of the GEMM op measured.
Index tile_rows(Index stride_bytes) {
  const Index g = std::gcd(stride_bytes, Index(4096));
  return g <= 512 ? 32 : g <= 1024 ? 16 : 8;
}

__attribute__((target("avx2"))) inline void transpose8_ps(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

__attribute__((target("avx2"))) inline __m256 load8_ps(const double* p) {
  return _mm256_set_m128(_mm256_cvtpd_ps(_mm256_loadu_pd(p + 4)), _mm256_cvtpd_ps(_mm256_loadu_pd(p)));
}
__attribute__((target("avx2"))) inline __m256 load8_ps(const float* p) {
  return _mm256_loadu_ps(p);
}
__attribute__((target("avx2"))) inline void store8_ps(__m256 v, float* p) {
  _mm256_storeu_ps(p, v);
}
__attribute__((target("avx2"))) inline void store8_ps(__m256 v, double* p) {
  _mm256_storeu_pd(p, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  _mm256_storeu_pd(p + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

// The edges the blocks leave, as copy_tiled's scalar loop.
template <class From, class To>
void edges(const From* src, Index ls, To* dst, Index ld, Index a0, Index a1, Index b0, Index b1) {
  for (Index a = a0; a < a1; ++a)
    for (Index b = b0; b < b1; ++b) dst[a * ld + b] = To(src[b * ls + a]);
}

// One 8x8 block at (a0, b0).
template <class From, class To>
__attribute__((target("avx2"))) inline void block8(const From* src, Index ls, To* dst, Index ld, Index a0,
                                                   Index b0) {
  __m256 r[8];
  for (int k = 0; k < 8; ++k) r[k] = load8_ps(src + (b0 + k) * ls + a0);
  transpose8_ps(r);
  for (int k = 0; k < 8; ++k) store8_ps(r[k], dst + (a0 + k) * ld + b0);
}

// One binary32 lane a value: the pairs with a float side. Tiles of
// tile_rows() rows of the destination, each filled along b.
template <class From, class To>
__attribute__((target("avx2"))) void transpose_ps(const From* src, Index ls, To* dst, Index ld, Index na,
                                                  Index nb) {
  const Index ma = na / 8 * 8, mb = nb / 8 * 8, tile = tile_rows(ld * Index(sizeof(To)));
  for (Index t0 = 0; t0 < ma; t0 += tile) {
    const Index t1 = std::min(ma, t0 + tile);
    for (Index b0 = 0; b0 < mb; b0 += 8)
      for (Index a0 = t0; a0 < t1; a0 += 8) block8(src, ls, dst, ld, a0, b0);
  }
  edges(src, ls, dst, ld, 0, ma, mb, nb);
  edges(src, ls, dst, ld, ma, na, 0, nb);
}

__attribute__((target("avx2"))) void transpose_pd(const double* src, Index ls, double* dst, Index ld,
                                                  Index na, Index nb) {
  const Index ma = na / 4 * 4, mb = nb / 4 * 4, tile = tile_rows(ld * Index(sizeof(double)));
  for (Index t0 = 0; t0 < ma; t0 += tile) {
    const Index t1 = std::min(ma, t0 + tile);
    for (Index b0 = 0; b0 < mb; b0 += 4)
      for (Index a0 = t0; a0 < t1; a0 += 4) {
        const __m256d v0 = _mm256_loadu_pd(src + b0 * ls + a0),
                      v1 = _mm256_loadu_pd(src + (b0 + 1) * ls + a0);
        const __m256d v2 = _mm256_loadu_pd(src + (b0 + 2) * ls + a0),
                      v3 = _mm256_loadu_pd(src + (b0 + 3) * ls + a0);
        const __m256d u0 = _mm256_unpacklo_pd(v0, v1), u1 = _mm256_unpackhi_pd(v0, v1);
        const __m256d u2 = _mm256_unpacklo_pd(v2, v3), u3 = _mm256_unpackhi_pd(v2, v3);
        _mm256_storeu_pd(dst + a0 * ld + b0, _mm256_permute2f128_pd(u0, u2, 0x20));
        _mm256_storeu_pd(dst + (a0 + 1) * ld + b0, _mm256_permute2f128_pd(u1, u3, 0x20));
        _mm256_storeu_pd(dst + (a0 + 2) * ld + b0, _mm256_permute2f128_pd(u0, u2, 0x31));
        _mm256_storeu_pd(dst + (a0 + 3) * ld + b0, _mm256_permute2f128_pd(u1, u3, 0x31));
      }
  }
  edges(src, ls, dst, ld, 0, ma, mb, nb);
  edges(src, ls, dst, ld, ma, na, 0, nb);
}

bool avx2() {
  return cpu_features().avx2;
}

}  // namespace

bool transposed_copy(const double* src, Index ls, float* dst, Index ld, Index na, Index nb) {
  if (!avx2()) return false;
  transpose_ps(src, ls, dst, ld, na, nb);
  return true;
}

bool transposed_copy(const float* src, Index ls, double* dst, Index ld, Index na, Index nb) {
  if (!avx2()) return false;
  transpose_ps(src, ls, dst, ld, na, nb);
  return true;
}

bool transposed_copy(const double* src, Index ls, double* dst, Index ld, Index na, Index nb) {
  if (!avx2()) return false;
  transpose_pd(src, ls, dst, ld, na, nb);
  return true;
}

}  // namespace rpsim::sim::detail
