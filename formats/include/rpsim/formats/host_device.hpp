// RPSIM_HD marks the per-element arithmetic that the CPU core and the CUDA
// backend share (rounding, the Tensor Core block FMA, the block scale rules):
// __host__ __device__ under nvcc, plain inline C++ for the host compiler, so
// one definition serves both devices. Code under it keeps to what a device
// can run: no exceptions, no allocation, no virtual calls, no std:: containers,
// no std:: math (the bit helpers below stand in for it).
//
// The shared functions live in an inline namespace named after the compiler
// (RPSIM_HD_ABI_BEGIN ... RPSIM_HD_ABI_END): a translation unit built by nvcc
// and one built by the host compiler each keep their own copy of an inline
// function instead of the linker merging the two, so the device-arith tests
// (tests/sim/cuda) really run the code nvcc compiled against the CPU core's.
// Types stay outside it (they are one type on both sides).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define RPSIM_HD __host__ __device__
#define RPSIM_HD_INLINE __host__ __device__ __forceinline__
#define RPSIM_HD_ABI_BEGIN inline namespace nvcc {
#define RPSIM_HD_ABI_END }
#else
#define RPSIM_HD
#define RPSIM_HD_INLINE inline
#define RPSIM_HD_ABI_BEGIN inline namespace host {
#define RPSIM_HD_ABI_END }
#endif

// `#pragma omp simd` for the host compiler only (nvcc's device pass has no OpenMP).
#if defined(__CUDACC__)
#define RPSIM_OMP_SIMD_MAX(var)
#define RPSIM_OMP_SIMD_SUM(var)
#else
#define RPSIM_HD_PRAGMA(text) _Pragma(#text)
#define RPSIM_OMP_SIMD_MAX(var) RPSIM_HD_PRAGMA(omp simd reduction(max : var))
#define RPSIM_OMP_SIMD_SUM(var) RPSIM_HD_PRAGMA(omp simd reduction(+ : var))
#endif

namespace rpsim::hd {
RPSIM_HD_ABI_BEGIN

using u128 = unsigned __int128;

RPSIM_HD_INLINE std::uint64_t bits_of(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
RPSIM_HD_INLINE double double_of(std::uint64_t b) {
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}
RPSIM_HD_INLINE std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
RPSIM_HD_INLINE float float_of(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// binary32 operations, each rounded once to nearest even and never fused
// (nvcc would contract a*b + c into an FMA; the host builds have
// -ffp-contract=off): the recipes' scale arithmetic and the kernel folds.
// A NaN operand gives x86 SSE's result, spelled out: the first NaN operand,
// quieted. PyTorch's CPU kernels (the recipes' references) compute a * b as
// vmulps(a, b); left to the hardware, the NaN out would hang on which operand
// the compiler puts first (a * b and a + b commute, and GCC and nvcc's host
// pass chose differently for one inlined call) and, on a GPU, be the
// canonical NaN whatever the operands. Selects, not branches, so that a loop over them vectorises (the block
// quantiser's elements, block_operand.cpp): the first NaN of a and b,
// quieted, else r.
RPSIM_HD_INLINE float first_nan_or(float a, float b, float r) {
  const std::uint32_t ab = bits_of(a), bb = bits_of(b);
  const float qa = float_of(ab | 0x00400000u), qb = float_of(bb | 0x00400000u);
  return (ab & 0x7fffffffu) > 0x7f800000u ? qa : ((bb & 0x7fffffffu) > 0x7f800000u ? qb : r);
}
RPSIM_HD_INLINE float mul_f32(float a, float b) {
#if defined(__CUDA_ARCH__)
  return first_nan_or(a, b, __fmul_rn(a, b));
#else
  return first_nan_or(a, b, a * b);
#endif
}
RPSIM_HD_INLINE float add_f32(float a, float b) {
#if defined(__CUDA_ARCH__)
  return first_nan_or(a, b, __fadd_rn(a, b));
#else
  return first_nan_or(a, b, a + b);
#endif
}
RPSIM_HD_INLINE float div_f32(float a, float b) {
#if defined(__CUDA_ARCH__)
  return first_nan_or(a, b, __fdiv_rn(a, b));
#else
  return first_nan_or(a, b, a / b);
#endif
}
RPSIM_HD_INLINE float fma_f32(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// Leading zeros of a non-zero 64-bit word.
RPSIM_HD_INLINE int clz64(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(x));
#else
  return __builtin_clzll(x);
#endif
}

// Index of the leading one of a non-zero 128-bit word.
RPSIM_HD_INLINE int msb_index(u128 x) {
  const std::uint64_t hi = std::uint64_t(x >> 64);
  if (hi) return 127 - clz64(hi);
  return 63 - clz64(std::uint64_t(x));
}

// Bit width of a 64-bit word (0 for 0), as std::bit_width.
RPSIM_HD_INLINE int bit_width64(std::uint64_t x) {
  return x == 0 ? 0 : 64 - clz64(x);
}

template <class T>
RPSIM_HD_INLINE T max_of(T a, T b) {
  return a < b ? b : a;
}
template <class T>
RPSIM_HD_INLINE T min_of(T a, T b) {
  return b < a ? b : a;
}

// binary64 classification and sign on the encoding (no <cmath> on the device).
RPSIM_HD_INLINE bool is_finite(double x) {
  return ((bits_of(x) >> 52) & 0x7ff) != 0x7ff;
}
RPSIM_HD_INLINE bool is_nan(double x) {
  return (bits_of(x) << 1) > 0xFFE0000000000000ull;
}
RPSIM_HD_INLINE bool is_inf(double x) {
  return (bits_of(x) << 1) == 0xFFE0000000000000ull;
}
RPSIM_HD_INLINE bool sign_bit(double x) {
  return (bits_of(x) >> 63) != 0;
}
RPSIM_HD_INLINE double abs_of(double x) {
  return double_of(bits_of(x) & ~(1ull << 63));
}
RPSIM_HD_INLINE double copy_sign(double magnitude, double sign) {
  return double_of((bits_of(magnitude) & ~(1ull << 63)) | (bits_of(sign) & (1ull << 63)));
}
RPSIM_HD_INLINE double quiet_nan() {
  return double_of(0x7FF8000000000000ull);
}
RPSIM_HD_INLINE double infinity(bool negative) {
  return double_of((negative ? 1ull << 63 : 0) | 0x7FF0000000000000ull);
}

// 2^e exactly, for -1074 <= e <= 1023.
RPSIM_HD_INLINE double exp2_exact(int e) {
  if (e >= -1022) return double_of(static_cast<std::uint64_t>(e + 1023) << 52);
  return double_of(1ull << (e + 1074));
}

RPSIM_HD_ABI_END
}  // namespace rpsim::hd
