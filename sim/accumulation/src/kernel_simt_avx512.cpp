// cuBLAS's CUDA-core kernel orders (kernel_simt_orders.hpp) on a block of
// 16 rows x 4 columns of outputs at once, for CPUs with AVX-512: one output a
// lane. Each lane is one CUDA thread's binary32 FFMA chain and adds, in the
// order the scalar path takes them, so the bits are the scalar path's
// (tests/sim/accumulation/test_kernel_simt.cpp compares the two). One chain
// is a run of dependent FMAs; four columns keep four of them in flight.
// The scalar path makes one fmaf call a product (the library is built for
// baseline x86-64): bench_gemm's BM_simt_* rows give the ratio.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "kernel_simt.hpp"
#include "rpsim/accumulation/gemm_kernel.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#define RPSIM_SIMT_X86 1
#include <immintrin.h>
#endif

#if RPSIM_SIMT_X86
// Everything below is compiled for AVX-512F + FMA, and only reached once
// usable() saw the CPU has them. Every header is included above this line, so
// no standard-library function is instantiated with the target.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#endif
#include "kernel_simt_orders.hpp"

namespace rpsim::sim::simt_avx512 {

namespace {

// kCols columns of kRows lanes. may_alias: its storage is the caller's
// binary32 scratch.
struct __attribute__((may_alias)) Lanes {
  __m512 v[kCols];
};

inline Lanes operator+(const Lanes& x, const Lanes& y) {
  Lanes r;
  for (int c = 0; c < kCols; ++c) r.v[c] = _mm512_add_ps(x.v[c], y.v[c]);
  return r;
}

// The block's products: row r's A at a[k * lda + r], column c's B at
// b[c * ldb + k].
struct Block {
  using V = Lanes;
  const float *a, *b;
  long lda, ldb, k0, k1;
  Lanes ffma(long k, const Lanes& acc) const {
    const __m512 x = _mm512_loadu_ps(a + k * lda);
    Lanes r;
    for (int c = 0; c < kCols; ++c) r.v[c] = _mm512_fmadd_ps(x, _mm512_set1_ps(b[c * ldb + k]), acc.v[c]);
    return r;
  }
};

}  // namespace

void block(const KernelSchedule& s, std::span<const KChunk> chunks, const float* a, long lda, const float* b,
           long ldb, float* out, float* scratch) {
  // Lanes are 64-byte aligned: scratch_floats() leaves room to align.
  auto* lanes =
      reinterpret_cast<Lanes*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) & ~std::uintptr_t{63});
  for (std::size_t q = 0; q < chunks.size(); ++q) {
    const Lanes sum = simt_orders::run(s, Block{a, b, lda, ldb, chunks[q].begin, chunks[q].end}, lanes);
    for (int c = 0; c < kCols; ++c) _mm512_storeu_ps(out + (q * kCols + c) * kRows, sum.v[c]);
  }
}

}  // namespace rpsim::sim::simt_avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

namespace rpsim::sim::simt_avx512 {

namespace {

// Scratch beyond this many accumulators (a dot kernel of thousands of
// blocks) takes the scalar path rather than megabytes a thread.
constexpr long kMaxScratch = 4096;

}  // namespace

std::size_t scratch_floats(const KernelSchedule& s) {
  return static_cast<std::size_t>(simt_scratch(s) + 1) * kRows * kCols;
}

bool usable(const KernelSchedule& s) {
#if RPSIM_SIMT_X86
  // gemm_kernel.hpp's switch: "avx512" where the CPU has AVX-512 (F, DQ, VL)
  // and FMA and no test or benchmark asked for the portable kernels.
  return std::string_view(gemm_kernel_isa()) == "avx512" && simt_scratch(s) <= kMaxScratch;
#else
  (void)s;
  return false;
#endif
}

#if !RPSIM_SIMT_X86
void block(const KernelSchedule&, std::span<const KChunk>, const float*, long, const float*, long, float*,
           float*) {
  std::abort();  // usable() is false: never called
}
#endif

}  // namespace rpsim::sim::simt_avx512
