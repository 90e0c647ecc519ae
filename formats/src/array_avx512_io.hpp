// Loads and stores of the AVX-512 array kernels: the plain instruction where
// every lane is live, the masked one only for a block's tail. On Zen 5 (AMD
// family 26, 2026-12-01, one thread) a masked load or store ran at half the
// plain rate from memory even with every lane live: binary32 -> bfloat16's
// loop (load, add, and, store) at 10^7 values took 2500 M/s masked, 2778
// with only the load masked, 4765 plain (memcpy 5165); in L1, 24 against 41
// G/s. The bits are the same: an all-ones mask loads and stores every lane.
#pragma once

#include <immintrin.h>

#include <cstdint>

#define RPSIM_AVX512_IO inline __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"), always_inline))

namespace rpsim::array_detail::avx512_io {

RPSIM_AVX512_IO bool all_live(__mmask8 live) {
  return live == __mmask8(0xFF);
}
RPSIM_AVX512_IO bool all_live(__mmask16 live) {
  return live == __mmask16(0xFFFF);
}

// Loads: lanes not live read as zero.
RPSIM_AVX512_IO __m512d load_pd(__mmask8 live, const double* p) {
  return all_live(live) ? _mm512_loadu_pd(p) : _mm512_maskz_loadu_pd(live, p);
}
RPSIM_AVX512_IO __m512i load_epi64(__mmask8 live, const void* p) {
  return all_live(live) ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi64(live, p);
}
RPSIM_AVX512_IO __m512i load_epi32(__mmask16 live, const void* p) {
  return all_live(live) ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(live, p);
}
RPSIM_AVX512_IO __m256 load_ps256(__mmask8 live, const float* p) {
  return all_live(live) ? _mm256_loadu_ps(p) : _mm256_maskz_loadu_ps(live, p);
}

// Stores: only the live lanes are written.
RPSIM_AVX512_IO void store_pd(double* p, __mmask8 live, __m512d v) {
  all_live(live) ? _mm512_storeu_pd(p, v) : _mm512_mask_storeu_pd(p, live, v);
}
RPSIM_AVX512_IO void store_ps(float* p, __mmask16 live, __m512 v) {
  all_live(live) ? _mm512_storeu_ps(p, v) : _mm512_mask_storeu_ps(p, live, v);
}
RPSIM_AVX512_IO void store_epi64(void* p, __mmask8 live, __m512i v) {
  all_live(live) ? _mm512_storeu_si512(p, v) : _mm512_mask_storeu_epi64(p, live, v);
}
RPSIM_AVX512_IO void store_epi32(void* p, __mmask16 live, __m512i v) {
  all_live(live) ? _mm512_storeu_si512(p, v) : _mm512_mask_storeu_epi32(p, live, v);
}
RPSIM_AVX512_IO void store_epi32_256(void* p, __mmask8 live, __m256i v) {
  all_live(live) ? _mm256_storeu_si256(static_cast<__m256i*>(p), v) : _mm256_mask_storeu_epi32(p, live, v);
}
RPSIM_AVX512_IO void store_epi16_256(void* p, __mmask16 live, __m256i v) {
  all_live(live) ? _mm256_storeu_si256(static_cast<__m256i*>(p), v) : _mm256_mask_storeu_epi16(p, live, v);
}
RPSIM_AVX512_IO void store_ps256(float* p, __mmask8 live, __m256 v) {
  all_live(live) ? _mm256_storeu_ps(p, v) : _mm256_mask_storeu_ps(p, live, v);
}

// Narrowing stores: each lane's low bits (vpmov*, truncating).
RPSIM_AVX512_IO void store_epi32_as_epi16(void* p, __mmask16 live, __m512i v) {
  all_live(live) ? _mm256_storeu_si256(static_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v))
                 : _mm512_mask_cvtepi32_storeu_epi16(p, live, v);
}
RPSIM_AVX512_IO void store_epi32_as_epi8(void* p, __mmask16 live, __m512i v) {
  all_live(live) ? _mm_storeu_si128(static_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v))
                 : _mm512_mask_cvtepi32_storeu_epi8(p, live, v);
}
RPSIM_AVX512_IO void store_epi64_as_epi32(void* p, __mmask8 live, __m512i v) {
  all_live(live) ? _mm256_storeu_si256(static_cast<__m256i*>(p), _mm512_cvtepi64_epi32(v))
                 : _mm512_mask_cvtepi64_storeu_epi32(p, live, v);
}
RPSIM_AVX512_IO void store_epi64_as_epi16(void* p, __mmask8 live, __m512i v) {
  all_live(live) ? _mm_storeu_si128(static_cast<__m128i*>(p), _mm512_cvtepi64_epi16(v))
                 : _mm512_mask_cvtepi64_storeu_epi16(p, live, v);
}
RPSIM_AVX512_IO void store_epi64_as_epi8(void* p, __mmask8 live, __m512i v) {
  all_live(live) ? _mm_storel_epi64(static_cast<__m128i*>(p), _mm512_cvtepi64_epi8(v))
                 : _mm512_mask_cvtepi64_storeu_epi8(p, live, v);
}

}  // namespace rpsim::array_detail::avx512_io

namespace rpsim::array_detail {
namespace io = avx512_io;
}

#undef RPSIM_AVX512_IO
