// binary16 (RNE, RTZ, RD, RU) and bfloat16 (RNE, RTZ) array rounding on
// AVX2 + F16C processors without AVX-512 (Zen 1/2, Haswell to Comet Lake):
// the method of array_narrow_avx512.cpp in 8 lanes. binary64 input is first
// rounded to odd into binary32 (Boldo and Melquiond, "When double rounding is
// odd": a round-to-odd result with p + 2 or more bits rounds to p bits as the
// input would, in every mode but SR; binary32's 24 bits and 2^-149 spacing
// cover binary16 and bfloat16). AVX2 has no conversion with its own rounding,
// so the round to odd is vcvtpd2ps in MXCSR's mode (nearest: the picker
// checks it), stepped one binary32 ulp toward zero where that went past the
// input (its bits less one: the magnitude's predecessor, FLT_MAX for an
// overflow to infinity) and its last bit set where inexact. Then binary16 by
// vcvtps2ph with the mode as its immediate (it rounds as round_pack does:
// subnormal results, overflow by direction); bfloat16 by integer operations
// on the encoding (array_narrow_avx512.cpp's bfloat16_round). NaN and
// infinity go to the scalar core. The binary64 AVX2 kernel did binary64 ->
// binary16 at about 310 M values/s on a Zen 2 core (an MLP step under
// fp16-amp spent a fifth of its time there).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "array_dispatch.hpp"
#include "rpsim/formats/cpu_features.hpp"

#define RPSIM_NARROW2_TARGET __attribute__((target("avx2,fma,f16c")))

namespace rpsim::array_detail {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

constexpr int bfloat16_rne = -1, bfloat16_rtz = -2;

// Four binary64 values -> their binary32 bits rounded to odd (NaN stays NaN).
RPSIM_NARROW2_TARGET inline __m128i odd4(__m256d x) {
  const __m256d magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF));
  const __m128 t = _mm256_cvtpd_ps(x);
  const __m256d back = _mm256_cvtps_pd(t);
  const __m256d past = _mm256_cmp_pd(_mm256_and_pd(back, magnitude), _mm256_and_pd(x, magnitude), _CMP_GT_OQ);
  const __m256d inexact = _mm256_cmp_pd(back, x, _CMP_NEQ_OQ);
  // The 64-bit lane masks as 32-bit ones (lanes 0, 2, 4, 6).
  const __m256i pick = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  const __m128i past32 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(past), pick));
  const __m128i inexact32 =
      _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(inexact), pick));
  const __m128i bits = _mm_add_epi32(_mm_castps_si128(t), past32);  // + (-1) where past
  return _mm_or_si128(bits, _mm_and_si128(inexact32, _mm_set1_epi32(1)));
}

// Eight binary32 values widened (exactly) into eight binary64 stores.
RPSIM_NARROW2_TARGET inline void store8_as_binary64(__m256 f, double* out) {
  _mm256_storeu_pd(out, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
  _mm256_storeu_pd(out + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
}

// Eight binary32 bit patterns -> the format's results in Out; returns a
// nonzero mask where an input is infinity or NaN.
template <int Path, class Out>
RPSIM_NARROW2_TARGET inline int round8(__m256i x, Out* out) {
  const __m256i exponent = _mm256_set1_epi32(0x7F800000);
  const int special =
      _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(x, exponent), exponent)));
  if constexpr (Path >= 0) {
    const __m128i h = _mm256_cvtps_ph(_mm256_castsi256_ps(x), Path);
    if constexpr (std::is_same_v<Out, std::uint16_t>) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), h);
    } else if constexpr (std::is_same_v<Out, float>) {
      _mm256_storeu_ps(out, _mm256_cvtph_ps(h));
    } else if constexpr (std::is_same_v<Out, double>) {
      store8_as_binary64(_mm256_cvtph_ps(h), out);
    } else {
      alignas(16) std::uint16_t tmp[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(tmp), h);
      for (int j = 0; j < 8; ++j) out[j] = Out(tmp[j]);
    }
  } else {
    // bfloat16's values are every 2^16-th binary32 code: RNE adds half an
    // ulp less one plus the kept last bit and truncates (the largest values
    // carry into infinity's code, as round_pack's overflow does); RTZ
    // truncates.
    if constexpr (Path == bfloat16_rne) {
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
      x = _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb));
    }
    x = _mm256_and_si256(x, _mm256_set1_epi32(std::int32_t(0xFFFF0000u)));
    if constexpr (std::is_same_v<Out, float>) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), x);
    } else if constexpr (std::is_same_v<Out, double>) {
      store8_as_binary64(_mm256_castsi256_ps(x), out);
    } else {
      alignas(32) std::uint32_t tmp[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), _mm256_srli_epi32(x, 16));
      for (int j = 0; j < 8; ++j) out[j] = Out(tmp[j]);
    }
  }
  return special;
}

// Eight inputs -> eight outputs.
template <int Path, class In, class Out>
RPSIM_NARROW2_TARGET inline int group8(const In* in, Out* out) {
  __m256i bits;
  if constexpr (std::is_same_v<In, double>)
    bits = _mm256_set_m128i(odd4(_mm256_loadu_pd(in + 4)), odd4(_mm256_loadu_pd(in)));
  else
    bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  return round8<Path>(bits, out);
}

template <int Path, class In, class Out>
RPSIM_NARROW2_TARGET void narrow2_kernel(const KernelParams& kp, const In* in, Out* out, std::size_t n,
                                         std::uint64_t index0) {
  std::size_t i = 0;
  int special = 0;
  for (; i + 8 <= n; i += 8) special |= group8<Path>(in + i, out + i);
  if (i < n) {  // the tail through zero-padded copies
    In pad_in[8] = {};
    Out pad_out[8];
    std::memcpy(pad_in, in + i, (n - i) * sizeof(In));
    special |= group8<Path>(pad_in, pad_out);
    std::memcpy(out + i, pad_out, (n - i) * sizeof(Out));
  }
  if (!special) return;
  for (std::size_t j = 0; j < n; ++j)
    if (!std::isfinite(in[j])) out[j] = reference_element<In, Out>(kp, in[j], index0 + j);
}

}  // namespace

template <class In, class Out>
KernelFn<In, Out> pick_narrow_avx2(const KernelParams& kp) {
  const CpuFeatures& c = cpu_features();
  const bool cpu = c.avx2 && c.f16c && c.fma;
  const Rounding& r = kp.rounding;
  if (!cpu || kp.identity || kp.hardware_binary32 || kp.fixed_point) return nullptr;
  if (kp.ftz || r.flush_subnormal_inputs || r.flush_subnormal_outputs) return nullptr;
  if (r.overflow.value_or(kp.fmt->overflow) != Overflow::infinity) return nullptr;
  // MXCSR: nearest (vcvtpd2ps rounds in its mode), no FTZ (it would flush
  // vcvtpd2ps's subnormal results), no DAZ (binary32 subnormal inputs).
  if ((_mm_getcsr() & 0xE040) != 0) return nullptr;
  // Zero and overflow are binary32 values, as for the AVX-512 kernels.
  if (matches<Binary16Format>(kp)) {
    switch (kp.mode) {
      case RoundingMode::nearest_even: return &narrow2_kernel<_MM_FROUND_TO_NEAREST_INT, In, Out>;
      case RoundingMode::toward_zero: return &narrow2_kernel<_MM_FROUND_TO_ZERO, In, Out>;
      case RoundingMode::down: return &narrow2_kernel<_MM_FROUND_TO_NEG_INF, In, Out>;
      case RoundingMode::up: return &narrow2_kernel<_MM_FROUND_TO_POS_INF, In, Out>;
      default: return nullptr;
    }
  }
  if (matches<Bfloat16Format>(kp)) {
    if (kp.mode == RoundingMode::nearest_even) return &narrow2_kernel<bfloat16_rne, In, Out>;
    if (kp.mode == RoundingMode::toward_zero) return &narrow2_kernel<bfloat16_rtz, In, Out>;
  }
  return nullptr;
}
#else
template <class In, class Out>
KernelFn<In, Out> pick_narrow_avx2(const KernelParams&) {
  return nullptr;
}
#endif

#define RPSIM_INSTANTIATE(In, Out) template KernelFn<In, Out> pick_narrow_avx2<In, Out>(const KernelParams&);
RPSIM_ARRAY_FOR_EACH_PAIR(RPSIM_INSTANTIATE)
#undef RPSIM_INSTANTIATE

}  // namespace rpsim::array_detail
