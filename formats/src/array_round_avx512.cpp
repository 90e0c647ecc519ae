// The array rounding kernel built for avx512, and the hardware conversions
// that are exact for their case (binary32 -> binary16 by vcvtps2ph,
// binary32 -> bfloat16 RNE by vcvtneps2bf16), chosen at run time by
// array_round.cpp when the CPU supports it. AVX-512 (F, BW, DQ, VL): 8 binary64 lanes, 64-bit multiplies for
// the counter RNG (vpmullq) and narrowing stores (vpmovqw). The target attribute sits on the wrapper only:
// round_block is inlined into it, and nothing else in this file is compiled for avx512.
#include <immintrin.h>

#include "array_dispatch.hpp"
#include "rpsim/formats/cpu_features.hpp"

// GCC widens the auto-vectorised kernel to 512 bits only when asked; clang
// rejects the whole target attribute if it sees this option, so it gets none.
#if defined(__clang__)
#define RPSIM_PREFER_512 ""
#else
#define RPSIM_PREFER_512 ",prefer-vector-width=512"
#endif

namespace rpsim::array_detail {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

struct Avx512 {
  template <class Fixed, int Kind, class In, class Out>
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi2,fma" RPSIM_PREFER_512))) static void
  run(const KernelParams& kp, const In* in, Out* out, std::size_t n, std::uint64_t index0) {
    kernel_block<Fixed, Kind, In, Out>(kp, in, out, n, index0);
  }
};

}  // namespace

template <class In, class Out>
KernelFn<In, Out> pick_avx512(const KernelParams& kp) {
  return pick_specialised<Avx512, In, Out>(kp);
}

namespace {

constexpr std::size_t lanes = 16;

// binary32 -> binary16 by vcvtps2ph with the rounding in its immediate. The
// instruction rounds exactly as round_pack does for RNE/RTZ/RD/RU: subnormal
// results kept, overflow to infinity or the largest finite by direction, and
// a NaN quieted with the top fraction bits kept (nan_from's x86/ARM rule).
// (The maskz form: GCC 12's plain _mm512_cvtps_ph trips -Wmaybe-uninitialized.)
template <int Immediate>
__attribute__((target("avx512f,avx512vl,avx512bw,f16c"))) void binary16_by_vcvtps2ph(
    const KernelParams&, const float* in, std::uint16_t* out, std::size_t n, std::uint64_t) {
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const __m256i h =
        _mm512_maskz_cvtps_ph(__mmask16(0xFFFF), _mm512_loadu_ps(in + i), Immediate | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
  }
  if (i < n) {
    const __mmask16 tail = __mmask16((1u << (n - i)) - 1);
    const __m256i h =
        _mm512_maskz_cvtps_ph(tail, _mm512_maskz_loadu_ps(tail, in + i), Immediate | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(out + i, tail, h);
  }
}

// binary32 -> bfloat16 by vcvtneps2bf16 (round to nearest even). The
// instruction treats subnormal inputs as zero, which round_pack does not, so a
// block holding one goes to the bit kernel; everything else (overflow to
// infinity, NaN quieted with its top payload bits) is what round_pack gives.
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,bmi2,fma" RPSIM_PREFER_512))) void
bfloat16_by_vcvtneps2bf16(const KernelParams& kp, const float* in, std::uint16_t* out, std::size_t n,
                          std::uint64_t index0) {
  const __m512i exponent = _mm512_set1_epi32(0x7F800000), fraction = _mm512_set1_epi32(0x007FFFFF);
  __mmask16 subnormal = 0;
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const __m512i x = _mm512_loadu_si512(in + i);
    subnormal |= _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(x, exponent), x, fraction);
  }
  for (std::size_t j = i; j < n; ++j) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(in[j]);
    subnormal |= (b & 0x7F800000u) == 0 && (b & 0x007FFFFFu) != 0;
  }
  if (subnormal) {
    Avx512::run<Bfloat16Format, kind_rne, float, std::uint16_t>(kp, in, out, n, index0);
    return;
  }
  for (i = 0; i + lanes <= n; i += lanes) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(in + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), reinterpret_cast<const __m256i&>(h));
  }
  if (i < n) {
    const __mmask16 tail = __mmask16((1u << (n - i)) - 1);
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(tail, in + i));
    _mm256_mask_storeu_epi16(out + i, tail, reinterpret_cast<const __m256i&>(h));
  }
}

// What the hardware conversions need from the call: no DAZ in MXCSR (it would
// flush subnormal inputs), the x86 NaN rule, no flushed inputs and overflow
// to infinity.
bool hardware_conversion_applies(const KernelParams& kp) {
  const Rounding& r = kp.rounding;
  if ((_mm_getcsr() & 0x0040) != 0) return false;
  if (r.nan_policy == NanPolicy::riscv || r.flush_subnormal_inputs) return false;
  return r.overflow.value_or(kp.fmt->overflow) == Overflow::infinity && kp.fmt->has_inf();
}

}  // namespace

KernelFn<float, std::uint16_t> pick_hardware_avx512(const KernelParams& kp) {
  const CpuFeatures& c = cpu_features();
  const bool f16c = c.f16c && c.avx512f && c.avx512vl && c.avx512bw;
  const bool bf16 = f16c && c.avx512bf16 && c.avx512dq;
  const Rounding& r = kp.rounding;
  if (!hardware_conversion_applies(kp)) return nullptr;
  if (f16c && matches<Binary16Format>(kp) && !r.flush_subnormal_outputs) {
    switch (r.mode) {
      case RoundingMode::nearest_even: return &binary16_by_vcvtps2ph<_MM_FROUND_TO_NEAREST_INT>;
      case RoundingMode::toward_zero: return &binary16_by_vcvtps2ph<_MM_FROUND_TO_ZERO>;
      case RoundingMode::down: return &binary16_by_vcvtps2ph<_MM_FROUND_TO_NEG_INF>;
      case RoundingMode::up: return &binary16_by_vcvtps2ph<_MM_FROUND_TO_POS_INF>;
      default: return nullptr;
    }
  }
  if (bf16 && matches<Bfloat16Format>(kp) && r.mode == RoundingMode::nearest_even) {
    return &bfloat16_by_vcvtneps2bf16;
  }
  return nullptr;
}
#else
KernelFn<float, std::uint16_t> pick_hardware_avx512(const KernelParams&) {
  return nullptr;
}
template <class In, class Out>
KernelFn<In, Out> pick_avx512(const KernelParams&) {
  return nullptr;
}
#endif

#define RPSIM_INSTANTIATE(In, Out) template KernelFn<In, Out> pick_avx512<In, Out>(const KernelParams&);
RPSIM_ARRAY_FOR_EACH_PAIR(RPSIM_INSTANTIATE)
#undef RPSIM_INSTANTIATE

}  // namespace rpsim::array_detail
