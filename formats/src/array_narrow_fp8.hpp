// The small formats (e5m2, e4m3, the MX FP6/FP4s) under RNE and RTZ by way
// of binary16, for array_narrow_avx512.cpp only (included there after its
// RPSIM_NARROW_TARGET). A format with man_bits <= 8 and the exponent
// range of binary16 shifted by 2^scale (scale = -14 - emin <= 0, emax +
// scale <= 15) is, scaled, binary16 with the last 10 - man_bits fraction bits
// dropped: same bias, same subnormal grid. So: the round-to-odd binary32
// value times 2^scale (exact: what it might round underflows far below
// binary16's 2^-25), rounded to odd into binary16 (vcvtps2ph toward zero,
// the last bit set where vcvtph2ps does not give the value back; 11 >=
// man_bits + 1 + 2 bits), then the dropped bits rounded off the encoding by
// integer addition as for bfloat16. A code above the format's largest finite
// one is its overflow, code 0 its zero, as in round_block. Internal to formats/.
#pragma once

#include <immintrin.h>

#include <cmath>

#include "array_avx512_io.hpp"
#include "array_kernel.hpp"

namespace rpsim::array_detail {

struct Child16 {
  float scale, unscale;  // 2^scale, 2^-scale
  std::uint32_t drop, half_less_one, max_code, sign_shift;
  std::uint32_t zero_bits[2], over_bits[2], zero_f[2], over_f[2];  // by sign; values as binary32 bits

  // Whether a format is such a child of binary16.
  static bool applies(const KernelParams& kp) {
    const int scale = -14 - kp.emin;
    return kp.man_bits <= 8 && scale <= 0 && kp.fmt->emax + scale <= 15;
  }
  explicit Child16(const KernelParams& kp)
      : scale(std::ldexp(1.0f, -14 - kp.emin)),
        unscale(std::ldexp(1.0f, 14 + kp.emin)),
        drop(std::uint32_t(10 - kp.man_bits)),
        half_less_one((std::uint32_t(1) << (9 - kp.man_bits)) - 1),
        max_code(std::uint32_t(kp.max_code)),
        sign_shift(std::uint32_t(kp.bits - 1)) {
    for (int s = 0; s < 2; ++s) {
      zero_bits[s] = std::uint32_t(kp.zero_bits[s]);
      over_bits[s] = std::uint32_t(kp.overflow_bits[s]);
      zero_f[s] = std::bit_cast<std::uint32_t>(float(kp.zero_value[s]));
      over_f[s] = std::bit_cast<std::uint32_t>(float(kp.overflow_value[s]));
    }
  }
};

RPSIM_NARROW_TARGET inline __m512i by_sign(__mmask16 negative, const std::uint32_t* pair) {
  return _mm512_mask_blend_epi32(negative, _mm512_set1_epi32(std::int32_t(pair[0])),
                                 _mm512_set1_epi32(std::int32_t(pair[1])));
}

// 16 elements from round-to-odd binary32 bits; returns the lanes holding
// infinity or NaN.
template <int Kind, class Out>
RPSIM_NARROW_TARGET inline __mmask16 child16_round16(const Child16& c, __mmask16 live, __m512i x, Out* out) {
  const __m512i exponent = _mm512_set1_epi32(0x7F800000), low15 = _mm512_set1_epi32(0x7FFF);
  const __m512i one = _mm512_set1_epi32(1), sign_bit = _mm512_set1_epi32(std::int32_t(0x80000000u));
  const __mmask16 special = _mm512_mask_cmpeq_epi32_mask(live, _mm512_and_si512(x, exponent), exponent);
  const __m512 f = _mm512_mul_ps(_mm512_castsi512_ps(x), _mm512_set1_ps(c.scale));
  __m512i h = _mm512_cvtepu16_epi32(_mm512_maskz_cvtps_ph(0xFFFF, f, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
  const __mmask16 inexact =
      _mm512_cmp_ps_mask(_mm512_maskz_cvtph_ps(0xFFFF, _mm512_cvtepi32_epi16(h)), f, _CMP_NEQ_OQ);
  h = _mm512_mask_or_epi32(h, inexact, h, one);
  const __m128i drop = _mm_cvtsi32_si128(int(c.drop));
  __m512i code = _mm512_and_si512(h, low15);
  if constexpr (Kind == kind_rne) {
    const __m512i lsb = _mm512_and_si512(_mm512_srl_epi32(code, drop), one);
    code = _mm512_add_epi32(code, _mm512_add_epi32(_mm512_set1_epi32(std::int32_t(c.half_less_one)), lsb));
  }
  code = _mm512_srl_epi32(code, drop);
  const __mmask16 negative = _mm512_test_epi32_mask(x, sign_bit);
  const __mmask16 over = _mm512_cmpgt_epu32_mask(code, _mm512_set1_epi32(std::int32_t(c.max_code)));
  const __mmask16 zero = _mm512_testn_epi32_mask(code, code);
  if constexpr (std::is_floating_point_v<Out>) {
    const __m256i h16 = _mm512_cvtepi32_epi16(_mm512_sll_epi32(code, drop));
    __m512i v =
        _mm512_castps_si512(_mm512_mul_ps(_mm512_maskz_cvtph_ps(0xFFFF, h16), _mm512_set1_ps(c.unscale)));
    v = _mm512_or_si512(v, _mm512_and_si512(x, sign_bit));
    v = _mm512_mask_blend_epi32(over, v, by_sign(negative, c.over_f));
    v = _mm512_mask_blend_epi32(zero, v, by_sign(negative, c.zero_f));
    if constexpr (std::is_same_v<Out, float>) {
      io::store_epi32(out, live, v);
    } else {
      const __m512 vf = _mm512_castsi512_ps(v);
      io::store_pd(out, __mmask8(live), _mm512_maskz_cvtps_pd(0xFF, _mm512_castps512_ps256(vf)));
      const __m256 upper = _mm256_castsi256_ps(_mm512_maskz_extracti32x8_epi32(0xFF, v, 1));
      io::store_pd(out + 8, __mmask8(live >> 8), _mm512_maskz_cvtps_pd(0xFF, upper));
    }
  } else {
    __m512i res = _mm512_or_si512(
        code, _mm512_sll_epi32(_mm512_srli_epi32(x, 31), _mm_cvtsi32_si128(int(c.sign_shift))));
    res = _mm512_mask_blend_epi32(over, res, by_sign(negative, c.over_bits));
    res = _mm512_mask_blend_epi32(zero, res, by_sign(negative, c.zero_bits));
    if constexpr (std::is_same_v<Out, std::uint8_t>) {
      io::store_epi32_as_epi8(out, live, res);
    } else if constexpr (std::is_same_v<Out, std::uint16_t>) {
      io::store_epi32_as_epi16(out, live, res);
    } else if constexpr (std::is_same_v<Out, std::uint32_t>) {
      io::store_epi32(out, live, res);
    } else {
      alignas(64) std::uint32_t tmp[16];
      _mm512_store_si512(tmp, res);
      for (int j = 0; j < 16; ++j)
        if ((live >> j) & 1) out[j] = Out(tmp[j]);
    }
  }
  return special;
}

}  // namespace rpsim::array_detail
