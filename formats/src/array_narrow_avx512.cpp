// Array rounding to formats inside binary32's range (binary16, bfloat16, the
// FP8s, ...) in 32-bit lanes on AVX-512, for every mode but stochastic
// rounding (issue #30). binary64 input is first rounded to odd into binary32
// (vcvtpd2ps toward zero, then the last bit set where that was inexact):
// Boldo and Melquiond, "When double rounding is odd" (2005/2008): rounding a
// round-to-odd result with p + 2 or more bits to p bits gives the directly
// rounded result under round to nearest (either tie rule), and under the
// directed modes and round to odd as well, because an odd binary32 value is
// never a value of the narrower format and stays between the same two of its
// neighbours. 24 >= man_bits + 1 + 2 for man_bits <= 21; binary32's subnormal
// spacing 2^-149 is at least 4x finer than the format's 2^(emin - man_bits)
// for emin >= -126; and above FLT_MAX the truncation is FLT_MAX (odd), which
// rounds as the input would for emax <= 127. Then the bit kernel of
// array_kernel.hpp, on the binary32 bits: twice the lanes of the binary64 one.
// binary16 under RNE, RTZ, RD and RU ends with vcvtps2ph on the round-to-odd
// binary32 values instead (the same argument, and the instruction rounds as
// round_pack does: subnormal results, overflow by direction). NaN and
// infinity go to the scalar core. Stochastic rounding needs the discarded
// bits beyond binary32's, so it stays on the binary64 kernel.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "array_dispatch.hpp"
#include "rpsim/formats/cpu_features.hpp"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__clang__)
#define RPSIM_PREFER_512 ""
#else
#define RPSIM_PREFER_512 ",prefer-vector-width=512"
#endif
#define RPSIM_NARROW_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi2,fma,f16c" RPSIM_PREFER_512)))

#include "array_narrow_fp8.hpp"

namespace rpsim::array_detail {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

// binary64 -> binary32 bits rounded to odd. NaN stays NaN (the scalar core
// redoes it). The maskz forms: GCC 12's plain ones trip -Wmaybe-uninitialized.
RPSIM_NARROW_TARGET inline void round_to_odd_binary32(const double* in, std::uint32_t* out, std::size_t n) {
  const __m256i one = _mm256_set1_epi32(1);
  for (std::size_t i = 0; i < n; i += 8) {
    const __mmask8 live = n - i >= 8 ? __mmask8(0xFF) : __mmask8((1u << (n - i)) - 1);
    const __m512d x = io::load_pd(live, in + i);
    const __m256 t = _mm512_maskz_cvt_roundpd_ps(live, x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask8 inexact = _mm512_cmp_pd_mask(_mm512_maskz_cvtps_pd(live, t), x, _CMP_NEQ_OQ);
    const __m256i bits = _mm256_castps_si256(t);
    io::store_epi32_256(out + i, live, _mm256_mask_or_epi32(bits, inexact, bits, one));
  }
}

// The per-call constants in 32-bit shapes (see BlockConstants).
struct Narrow {
  std::uint32_t m, sign_shift, max_code, base_shift, away, down, upward, odd, implicit;
  std::uint32_t k_shift, k_mask;  // stochastic rounding with k <= 32 bits: 32 - k, 2^k - 1
  std::uint64_t key;
  std::int32_t emin;
  float tiny_scale;  // 2^(emin - m + 64): normal for emin >= -126, man_bits <= 21
  std::uint32_t zero_pos, zero_diff, over_pos, over_diff;          // encodings, by sign
  std::uint32_t zero_f_pos, zero_f_diff, over_f_pos, over_f_diff;  // binary32 values, by sign
  explicit Narrow(const KernelParams& kp)
      : m(std::uint32_t(kp.man_bits)),
        sign_shift(std::uint32_t(kp.bits - 1)),
        max_code(std::uint32_t(kp.max_code)),
        base_shift(23 - std::uint32_t(kp.man_bits)),
        away(kp.mode == RoundingMode::nearest_away ? 1 : 0),
        down(kp.mode == RoundingMode::down ? 1 : 0),
        upward(kp.mode == RoundingMode::up ? 1 : 0),
        odd(kp.mode == RoundingMode::odd ? 1 : 0),
        implicit(std::uint32_t(1) << kp.man_bits),
        k_shift(std::uint32_t(32 - std::min(kp.stochastic_bits, 32))),
        k_mask(std::uint32_t((std::uint64_t(1) << std::min(kp.stochastic_bits, 32)) - 1)),
        key(kp.key),
        emin(kp.emin),
        tiny_scale(std::ldexp(1.0f, kp.emin - kp.man_bits + 64)),
        zero_pos(std::uint32_t(kp.zero_bits[0])),
        zero_diff(std::uint32_t(kp.zero_bits[0] ^ kp.zero_bits[1])),
        over_pos(std::uint32_t(kp.overflow_bits[0])),
        over_diff(std::uint32_t(kp.overflow_bits[0] ^ kp.overflow_bits[1])),
        zero_f_pos(std::bit_cast<std::uint32_t>(float(kp.zero_value[0]))),
        zero_f_diff(zero_f_pos ^ std::bit_cast<std::uint32_t>(float(kp.zero_value[1]))),
        over_f_pos(std::bit_cast<std::uint32_t>(float(kp.overflow_value[0]))),
        over_f_diff(over_f_pos ^ std::bit_cast<std::uint32_t>(float(kp.overflow_value[1]))) {}
};

// round_block (array_kernel.hpp) on binary32 bits: the same steps in 32-bit
// lanes, binary32 subnormals included (E = -126 without the implicit bit).
// Returns nonzero where an input is infinity or NaN. Value outputs are built
// as binary32 values.
template <int Kind, class Out>
RPSIM_NARROW_TARGET inline std::uint32_t narrow_round(const Narrow& c, const std::uint32_t* __restrict b32,
                                                      const std::uint32_t* __restrict random,
                                                      Out* __restrict out, std::size_t n) {
  constexpr std::uint32_t half = 0x80000000u;
  std::uint32_t any_special = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t x = b32[i];
    const std::uint32_t sign = x >> 31, field = (x >> 23) & 0xFF;
    any_special |= field == 0xFF ? 1 : 0;
    const std::int32_t E = std::int32_t(field > 1 ? field : 1) - 127;
    const std::uint32_t sig = (x & 0x7FFFFF) | (field != 0 ? 0x800000u : 0);
    const std::int32_t extra = c.emin - E > 0 ? c.emin - E : 0;
    const std::int32_t Eb = E + extra;
    // >= 2 (man_bits <= 21); beyond 25 every pattern is "below half, inexact" (sig < 2^24).
    const std::uint32_t s0 = c.base_shift + std::uint32_t(extra);
    const std::uint32_t s = s0 < 25 ? s0 : 25;
    std::uint32_t kept = sig >> s, up = 0;
    const std::uint32_t rem = sig << (32 - s);
    if constexpr (Kind == kind_rne) {
      up = rem > half ? 1 : (rem == half ? (kept & 1) : 0);
    } else if constexpr (Kind == kind_sr) {
      // binary32 input only: the discarded fraction's top 32 bits,
      // floor(F 2^32), is then exact in 32 bits (sig < 2^24), and its top
      // k <= 32 bits plus k random bits carry out iff they exceed k_mask.
      const std::uint32_t low = s0 <= 32 ? sig << (s0 <= 32 ? 32 - s0 : 0) : 0;
      const std::uint32_t high = s0 > 32 ? sig >> (s0 - 32 < 31 ? s0 - 32 : 31) : 0;
      up = ((low | high) >> c.k_shift) > c.k_mask - random[i] ? 1 : 0;
    } else if constexpr (Kind == kind_other) {
      const std::uint32_t inexact = rem != 0 ? 1 : 0;
      up = (c.away & (rem >= half ? 1 : 0)) | (c.down & inexact & sign) | (c.upward & inexact & (sign ^ 1));
      kept |= c.odd & inexact;
    }
    const std::uint32_t mag = kept + up;
    const std::uint32_t code = (std::uint32_t(Eb - c.emin) << c.m) + mag;
    const std::uint32_t sign_mask = 0 - sign;
    const bool is_zero = code == 0, is_over = code > c.max_code;
    if constexpr (std::is_floating_point_v<Out>) {
      // A normal result: mag as a binary32 (exact, mag <= 2^22), its exponent
      // moved by integer addition. A subnormal one of the format (mag < 2^m,
      // Eb = emin): mag 2^(emin - m) by two exact multiplies, the first
      // keeping the product normal (a subnormal binary32, as bfloat16's, cannot
      // take the addition).
      const float fm = float(std::int32_t(mag));
      const std::uint32_t normal =
          std::bit_cast<std::uint32_t>(fm) + (std::uint32_t(Eb - std::int32_t(c.m)) << 23);
      const std::uint32_t tiny = std::bit_cast<std::uint32_t>(fm * c.tiny_scale * 0x1p-64f);
      std::uint32_t vb = (mag < c.implicit ? tiny : normal) | (sign << 31);
      vb = is_over ? c.over_f_pos ^ (c.over_f_diff & sign_mask) : vb;
      vb = is_zero ? c.zero_f_pos ^ (c.zero_f_diff & sign_mask) : vb;
      out[i] = Out(std::bit_cast<float>(vb));
    } else {
      std::uint32_t res = (sign << c.sign_shift) | code;
      res = is_over ? c.over_pos ^ (c.over_diff & sign_mask) : res;
      res = is_zero ? c.zero_pos ^ (c.zero_diff & sign_mask) : res;
      out[i] = Out(res);
    }
  }
  return any_special;
}

// binary16 by vcvtps2ph from the (round-to-odd) binary32 bits.
template <int Immediate, class Out>
RPSIM_NARROW_TARGET inline std::uint32_t binary16_round(const std::uint32_t* __restrict b32,
                                                        Out* __restrict out, std::size_t n) {
  const __m512i exponent = _mm512_set1_epi32(0x7F800000);
  __mmask16 special = 0;
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 live = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512i x = io::load_epi32(live, b32 + i);
    special |= _mm512_mask_cmpeq_epi32_mask(live, _mm512_and_si512(x, exponent), exponent);
    const __m256i h = _mm512_maskz_cvtps_ph(live, _mm512_castsi512_ps(x), Immediate | _MM_FROUND_NO_EXC);
    if constexpr (std::is_same_v<Out, std::uint16_t>) {
      io::store_epi16_256(out + i, live, h);
    } else if constexpr (std::is_same_v<Out, float>) {
      io::store_ps(out + i, live, _mm512_maskz_cvtph_ps(live, h));
    } else if constexpr (std::is_same_v<Out, double>) {
      const __m128i lo = _mm256_castsi256_si128(h), hi = _mm256_maskz_extracti32x4_epi32(0xFF, h, 1);
      io::store_pd(out + i, __mmask8(live), _mm512_maskz_cvtps_pd(0xFF, _mm256_cvtph_ps(lo)));
      io::store_pd(out + i + 8, __mmask8(live >> 8), _mm512_maskz_cvtps_pd(0xFF, _mm256_cvtph_ps(hi)));
    } else {
      alignas(32) std::uint16_t tmp[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), h);
      for (std::size_t j = 0; j < 16 && i + j < n; ++j) out[i + j] = Out(tmp[j]);
    }
  }
  return special;
}

// bfloat16 under RNE or RTZ from the (round-to-odd) binary32 bits by integer
// operations on the encoding, which is monotone in the value with bfloat16's
// values on every 2^16-th code, binary32 subnormals included: RNE adds half
// an ulp less one plus the kept last bit and truncates, so the largest
// values carry into infinity's code as round_pack's overflow does; RTZ
// truncates and stops at the largest finite. (vcvtneps2bf16 would flush
// binary32 subnormals.)
template <int Kind, class Out>
RPSIM_NARROW_TARGET inline std::uint32_t bfloat16_round(const std::uint32_t* __restrict b32,
                                                        Out* __restrict out, std::size_t n) {
  const __m512i exponent = _mm512_set1_epi32(0x7F800000), high = _mm512_set1_epi32(std::int32_t(0xFFFF0000u));
  const __m512i half_less_one = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1);
  __mmask16 special = 0;
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 live = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    __m512i x = io::load_epi32(live, b32 + i);
    special |= _mm512_mask_cmpeq_epi32_mask(live, _mm512_and_si512(x, exponent), exponent);
    if constexpr (Kind == kind_rne) {
      const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), one);
      x = _mm512_add_epi32(x, _mm512_add_epi32(half_less_one, lsb));
    }
    x = _mm512_and_si512(x, high);
    if constexpr (std::is_same_v<Out, float>) {
      io::store_epi32(out + i, live, x);
    } else if constexpr (std::is_same_v<Out, double>) {
      const __m512 f = _mm512_castsi512_ps(x);
      io::store_pd(out + i, __mmask8(live), _mm512_maskz_cvtps_pd(0xFF, _mm512_castps512_ps256(f)));
      const __m256 upper = _mm256_castsi256_ps(_mm512_maskz_extracti32x8_epi32(0xFF, x, 1));
      io::store_pd(out + i + 8, __mmask8(live >> 8), _mm512_maskz_cvtps_pd(0xFF, upper));
    } else if constexpr (std::is_same_v<Out, std::uint16_t>) {
      io::store_epi32_as_epi16(out + i, live, _mm512_srli_epi32(x, 16));
    } else {
      alignas(64) std::uint32_t tmp[16];
      _mm512_store_si512(tmp, _mm512_srli_epi32(x, 16));
      for (std::size_t j = 0; j < 16 && i + j < n; ++j) out[i + j] = Out(tmp[j]);
    }
  }
  return special;
}

constexpr int generic_path = -1, bfloat16_path = -2, child16_path = -3;

template <int Kind, class Out>
RPSIM_NARROW_TARGET inline std::uint32_t child16_round(const Child16& c, const std::uint32_t* b32, Out* out,
                                                       std::size_t n) {
  __mmask16 special = 0;
  for (std::size_t i = 0; i < n; i += 16) {
    const __mmask16 live = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    special |= child16_round16<Kind>(c, live, io::load_epi32(live, b32 + i), out + i);
  }
  return special;
}

// Path: generic_path (narrow_round in the mode Kind), bfloat16_path
// (bfloat16_round), child16_path (array_narrow_fp8.hpp) or a vcvtps2ph
// rounding immediate (binary16_round).
template <int Kind, int Path, class In, class Out>
RPSIM_NARROW_TARGET void narrow_kernel(const KernelParams& kp, const In* in, Out* out, std::size_t n,
                                       std::uint64_t index0) {
  const Narrow c(kp);
  alignas(64) std::uint32_t b32[block_elements];
  alignas(64) std::uint32_t random[Kind == kind_sr ? block_elements : 1];
  for (std::size_t b = 0; b < n; b += block_elements) {
    const std::size_t len = std::min(block_elements, n - b);
    // The binary32 bits: binary32 input is read in place by the intrinsic
    // paths (their loads may alias), copied for the C++ loop.
    const std::uint32_t* bits = b32;
    if constexpr (std::is_same_v<In, double>)
      round_to_odd_binary32(in + b, b32, len);
    else if constexpr (Path != generic_path)
      bits = reinterpret_cast<const std::uint32_t*>(in + b);
    else
      std::memcpy(b32, in + b, len * sizeof(float));
    if constexpr (Kind == kind_sr) {
      for (std::size_t i = 0; i < len; ++i)  // counter_random's draw, as decide_rounding takes it
        random[i] = std::uint32_t(mix64(c.key ^ (index0 + b + i))) & c.k_mask;
    }
    std::uint32_t special;
    if constexpr (Path >= 0)
      special = binary16_round<Path>(bits, out + b, len);
    else if constexpr (Path == bfloat16_path)
      special = bfloat16_round<Kind>(bits, out + b, len);
    else if constexpr (Path == child16_path)
      special = child16_round<Kind>(Child16(kp), bits, out + b, len);
    else
      special = narrow_round<Kind>(c, b32, random, out + b, len);
    if (!special) continue;
    for (std::size_t i = b; i < b + len; ++i)
      if (!std::isfinite(in[i])) out[i] = reference_element<In, Out>(kp, in[i], index0 + i);
  }
}

// The binary32 versions of the call's zero and overflow values are exact
// (value outputs are built in binary32 and widened).
bool values_fit_binary32(const KernelParams& kp) {
  for (int s = 0; s < 2; ++s) {
    for (double v : {kp.zero_value[s], kp.overflow_value[s]})
      if (std::bit_cast<std::uint64_t>(double(float(v))) != std::bit_cast<std::uint64_t>(v)) return false;
  }
  return true;
}

}  // namespace

template <class In, class Out>
KernelFn<In, Out> pick_narrow_avx512(const KernelParams& kp) {
  const CpuFeatures& c = cpu_features();
  const bool cpu = c.avx512f && c.avx512bw && c.avx512dq && c.avx512vl && c.bmi2 && c.fma;
  const Rounding& r = kp.rounding;
  if (!cpu || kp.identity || kp.hardware_binary32 || kp.fixed_point) return nullptr;
  if (kp.ftz || r.flush_subnormal_inputs) return nullptr;
  // Stochastic rounding needs the input's own discarded bits: binary32 input only.
  if (kp.mode == RoundingMode::stochastic && (std::is_same_v<In, double> || kp.stochastic_bits > 32))
    return nullptr;
  // The round-to-odd bounds above; within them every format value is a binary32 value.
  if (kp.man_bits > 21 || kp.emin < -126 || kp.fmt->emax > 127) return nullptr;
  // MXCSR's FTZ would flush vcvtpd2ps's subnormal results, DAZ the binary32 subnormal inputs.
  if ((_mm_getcsr() & 0x8040) != 0) return nullptr;
  if (std::is_floating_point_v<Out> && !values_fit_binary32(kp)) return nullptr;
  if (matches<Binary16Format>(kp) && r.overflow.value_or(kp.fmt->overflow) == Overflow::infinity) {
    switch (kp.mode) {
      case RoundingMode::nearest_even: return &narrow_kernel<kind_rne, _MM_FROUND_TO_NEAREST_INT, In, Out>;
      case RoundingMode::toward_zero: return &narrow_kernel<kind_rtz, _MM_FROUND_TO_ZERO, In, Out>;
      case RoundingMode::down: return &narrow_kernel<kind_other, _MM_FROUND_TO_NEG_INF, In, Out>;
      case RoundingMode::up: return &narrow_kernel<kind_other, _MM_FROUND_TO_POS_INF, In, Out>;
      default: break;
    }
  }
  if (matches<Bfloat16Format>(kp) && r.overflow.value_or(kp.fmt->overflow) == Overflow::infinity) {
    if (kp.mode == RoundingMode::nearest_even) return &narrow_kernel<kind_rne, bfloat16_path, In, Out>;
    if (kp.mode == RoundingMode::toward_zero) return &narrow_kernel<kind_rtz, bfloat16_path, In, Out>;
  }
  if (Child16::applies(kp)) {
    if (kp.mode == RoundingMode::nearest_even) return &narrow_kernel<kind_rne, child16_path, In, Out>;
    if (kp.mode == RoundingMode::toward_zero) return &narrow_kernel<kind_rtz, child16_path, In, Out>;
  }
  // GCC 12 leaves the C++ loop scalar for 8- and 16-bit outputs (222 M
  // values/s for SR binary32 -> binary16 encodings, measured): the binary64
  // kernels do those.
  if constexpr (sizeof(Out) < 4) return nullptr;
  switch (mode_kind(kp.mode)) {
    case kind_rne: return &narrow_kernel<kind_rne, generic_path, In, Out>;
    case kind_rtz: return &narrow_kernel<kind_rtz, generic_path, In, Out>;
    case kind_sr:
      if constexpr (std::is_same_v<In, float>) return &narrow_kernel<kind_sr, generic_path, In, Out>;
      return nullptr;
    default: return &narrow_kernel<kind_other, generic_path, In, Out>;
  }
}
#else
template <class In, class Out>
KernelFn<In, Out> pick_narrow_avx512(const KernelParams&) {
  return nullptr;
}
#endif

#define RPSIM_INSTANTIATE(In, Out) \
  template KernelFn<In, Out> pick_narrow_avx512<In, Out>(const KernelParams&);
RPSIM_ARRAY_FOR_EACH_PAIR(RPSIM_INSTANTIATE)
#undef RPSIM_INSTANTIATE

}  // namespace rpsim::array_detail
