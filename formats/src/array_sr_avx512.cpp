// Stochastic rounding of arrays on AVX-512, written with intrinsics (issue
// #30). The same steps as round_block (array_kernel.hpp) with kind_sr, bit for
// bit: GCC 12's vectorisation of that loop reloads and rebroadcasts its
// constants every iteration (33 vpbroadcastq and 29 vmovdqa64 among the 260
// instructions per 16 elements, measured with objdump), and it stays at the
// same 0.5 G values/s in L1 as from memory, so it was bound by instructions,
// not by memory. Here every constant is in a register and the x86 variable
// shifts' rule (a count of 64 or more gives 0) replaces the clamps: about 40
// instructions per 8 elements. binary64 subnormal inputs take the general
// formula (E = -1022 without the implicit bit); infinity and NaN go to the
// scalar core.
#include <immintrin.h>

#include <cmath>

#include "array_avx512_io.hpp"
#include "array_dispatch.hpp"
#include "rpsim/formats/cpu_features.hpp"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define RPSIM_SR_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi2,fma")))

namespace rpsim::array_detail {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

using V = __m512i;

RPSIM_SR_TARGET inline V splat(std::uint64_t x) {
  return _mm512_set1_epi64(std::int64_t(x));
}

// The stored result for 8 elements; integer outputs get the encoding.
template <class Out>
RPSIM_SR_TARGET inline void store(Out* out, __mmask8 live, V bits) {
  if constexpr (std::is_same_v<Out, double>) {
    io::store_epi64(out, live, bits);
  } else if constexpr (std::is_same_v<Out, float>) {
    // The value is a binary32 value: exact (make_plan checks FTZ is off).
    io::store_ps256(out, live, _mm512_maskz_cvtpd_ps(live, _mm512_castsi512_pd(bits)));
  } else if constexpr (std::is_same_v<Out, std::uint64_t>) {
    io::store_epi64(out, live, bits);
  } else if constexpr (std::is_same_v<Out, std::uint32_t>) {
    io::store_epi64_as_epi32(out, live, bits);
  } else if constexpr (std::is_same_v<Out, std::uint16_t>) {
    io::store_epi64_as_epi16(out, live, bits);
  } else {
    io::store_epi64_as_epi8(out, live, bits);
  }
}

template <class In, class Out>
RPSIM_SR_TARGET void sr_kernel(const KernelParams& kp, const In* in, Out* out, std::size_t n,
                               std::uint64_t index0) {
  constexpr bool values = std::is_floating_point_v<Out>;
  const V zero = _mm512_setzero_si512(), one = splat(1), sixty_four = splat(64);
  const V field_mask = splat(0x7FF), fraction = splat((std::uint64_t(1) << 52) - 1);
  const V implicit = splat(std::uint64_t(1) << 52), bias = splat(1023);
  const V emin = splat(std::uint64_t(std::int64_t(kp.emin))),
          base_shift = splat(std::uint64_t(52 - kp.man_bits));
  const V man = splat(std::uint64_t(kp.man_bits)), max_code = splat(kp.max_code);
  const V key = splat(kp.key), golden = splat(0x9E3779B97F4A7C15ull);
  const V c1 = splat(0xBF58476D1CE4E5B9ull), c2 = splat(0x94D049BB133111EBull);
  const V k_mask = splat((std::uint64_t(1) << kp.stochastic_bits) - 1);
  const __m128i k = _mm_cvtsi64_si128(kp.stochastic_bits), top = _mm_cvtsi64_si128(64 - kp.stochastic_bits);
  const __m128i sign_shift = _mm_cvtsi64_si128(values ? 63 : kp.bits - 1);
  const __m128i man_shift = _mm_cvtsi64_si128(kp.man_bits);
  auto by_sign = [](const std::uint64_t* pair, const double* value_pair, int s) {
    return values ? std::bit_cast<std::uint64_t>(value_pair[s]) : pair[s];
  };
  const V zero_pos = splat(by_sign(kp.zero_bits, kp.zero_value, 0));
  const V zero_neg = splat(by_sign(kp.zero_bits, kp.zero_value, 1));
  const V over_pos = splat(by_sign(kp.overflow_bits, kp.overflow_value, 0));
  const V over_neg = splat(by_sign(kp.overflow_bits, kp.overflow_value, 1));
  const V lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  __mmask8 special = 0;
  for (std::size_t i = 0; i < n; i += 8) {
    const __mmask8 live = n - i >= 8 ? __mmask8(0xFF) : __mmask8((1u << (n - i)) - 1);
    V x;
    if constexpr (std::is_same_v<In, double>)
      x = io::load_epi64(live, in + i);
    else  // exact, binary32 subnormals included (make_plan checks DAZ is off)
      x = _mm512_castpd_si512(_mm512_maskz_cvtps_pd(live, io::load_ps256(live, in + i)));
    const V sign = _mm512_srli_epi64(x, 63);
    const V field = _mm512_and_si512(_mm512_srli_epi64(x, 52), field_mask);
    special |= _mm512_mask_cmpeq_epi64_mask(live, field, field_mask);
    const V E = _mm512_sub_epi64(_mm512_max_epi64(field, one), bias);
    const V sig = _mm512_mask_or_epi64(_mm512_and_si512(x, fraction), _mm512_test_epi64_mask(field, field),
                                       _mm512_and_si512(x, fraction), implicit);
    const V extra = _mm512_max_epi64(_mm512_sub_epi64(emin, E), zero);
    const V Eb = _mm512_add_epi64(E, extra);
    const V shift = _mm512_add_epi64(base_shift, extra);
    // A count of 64 or more shifts everything out: kept = sig >> shift, and
    // the discarded fraction's top 64 bits from whichever term applies.
    const V kept = _mm512_srlv_epi64(sig, shift);
    const V frac64 = _mm512_or_si512(_mm512_sllv_epi64(sig, _mm512_sub_epi64(sixty_four, shift)),
                                     _mm512_srlv_epi64(sig, _mm512_sub_epi64(shift, sixty_four)));
    // mix64(key ^ index) (random.hpp), as counter_random draws it.
    V z = _mm512_add_epi64(_mm512_xor_si512(key, _mm512_add_epi64(splat(index0 + i), lane)), golden);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), c1);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
    const V r = _mm512_and_si512(z, k_mask);
    const V up = _mm512_srl_epi64(_mm512_add_epi64(_mm512_srl_epi64(frac64, top), r), k);
    const V mag = _mm512_add_epi64(kept, up);
    const V code = _mm512_add_epi64(_mm512_sll_epi64(_mm512_sub_epi64(Eb, emin), man_shift), mag);
    V res;
    if constexpr (values) {
      // mag 2^(Eb - m): exact, and normal (emin - man_bits >= -1022 is checked before).
      const V md = _mm512_castpd_si512(_mm512_cvtepu64_pd(mag));
      res = _mm512_add_epi64(md, _mm512_slli_epi64(_mm512_sub_epi64(Eb, man), 52));
    } else {
      res = code;
    }
    res = _mm512_or_si512(res, _mm512_sll_epi64(sign, sign_shift));
    const __mmask8 negative = _mm512_test_epi64_mask(sign, sign);
    res = _mm512_mask_blend_epi64(_mm512_cmpgt_epu64_mask(code, max_code), res,
                                  _mm512_mask_blend_epi64(negative, over_pos, over_neg));
    res = _mm512_mask_blend_epi64(_mm512_cmpeq_epi64_mask(code, zero), res,
                                  _mm512_mask_blend_epi64(negative, zero_pos, zero_neg));
    store(out + i, live, res);
  }
  if (!special) return;
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(in[i])) out[i] = reference_element<In, Out>(kp, in[i], index0 + i);
}

}  // namespace

template <class In, class Out>
KernelFn<In, Out> pick_sr_avx512(const KernelParams& kp) {
  const CpuFeatures& c = cpu_features();
  const bool cpu = c.avx512f && c.avx512bw && c.avx512dq && c.avx512vl;
  const Rounding& r = kp.rounding;
  if (!cpu || kp.mode != RoundingMode::stochastic || kp.identity || kp.fixed_point) return nullptr;
  if (kp.ftz || r.flush_subnormal_inputs) return nullptr;
  // DAZ would flush binary32 subnormal inputs in the widening, FTZ a binary32 output's subnormals.
  if ((_mm_getcsr() & 0x8040) != 0) return nullptr;
  if constexpr (std::is_same_v<Out, float>) {
    for (int s = 0; s < 2; ++s) {
      for (double v : {kp.zero_value[s], kp.overflow_value[s]})
        if (std::bit_cast<std::uint64_t>(double(float(v))) != std::bit_cast<std::uint64_t>(v)) return nullptr;
    }
  }
  return &sr_kernel<In, Out>;
}
#else
template <class In, class Out>
KernelFn<In, Out> pick_sr_avx512(const KernelParams&) {
  return nullptr;
}
#endif

#define RPSIM_INSTANTIATE(In, Out) template KernelFn<In, Out> pick_sr_avx512<In, Out>(const KernelParams&);
RPSIM_ARRAY_FOR_EACH_PAIR(RPSIM_INSTANTIATE)
#undef RPSIM_INSTANTIATE

}  // namespace rpsim::array_detail
