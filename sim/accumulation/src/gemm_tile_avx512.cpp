// The tile kernel of gemm_tile.hpp built for AVX-512 (F, DQ, VL), chosen at
// run time. Every operation is the scalar step's (tensor_core_step.hpp,
// tensor_core_finish.hpp) on eight lanes: the products, their power-of-two
// scaling and truncation are exact in binary64, and the truncated terms are
// integers below 2^53, so summing them in another order gives the same sum.
// Results that are not normal in the output format (or overflow) and
// accumulators that are not finite take the scalar code, lane by lane.
#if defined(__x86_64__) && defined(__GNUC__)
#define RPSIM_TILE_X86 1
#include <immintrin.h>
#endif

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "gemm_tile.hpp"
#include "rpsim/accumulation/gemm_kernel.hpp"
#include "rpsim/formats/cpu_features.hpp"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -W(maybe-)uninitialized reports once inlined (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define RPSIM_TILE_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))

namespace rpsim::sim::tc_detail {

namespace {

#if RPSIM_TILE_X86
// c_exponent() on eight lanes (c finite): the binary64 exponent field less
// the bias, clamped at c_emin (which also covers binary64 subnormals, whose
// field reads -1023 < c_emin), kZeroExponent for zeros.
RPSIM_TILE_TARGET inline __m256i c_exponents(__m512d c, int c_emin) {
  const __m512i field =
      _mm512_and_si512(_mm512_srli_epi64(_mm512_castpd_si512(c), 52), _mm512_set1_epi64(0x7ff));
  __m256i e = _mm256_sub_epi32(_mm512_cvtepi64_epi32(field), _mm256_set1_epi32(1023));
  e = _mm256_max_epi32(e, _mm256_set1_epi32(c_emin));
  const __mmask8 zero = _mm512_cmp_pd_mask(c, _mm512_setzero_pd(), _CMP_EQ_OQ);
  return _mm256_mask_mov_epi32(e, zero, _mm256_set1_epi32(kZeroExponent));
}

// 2^e on eight lanes (-1022 <= e <= 1023).
RPSIM_TILE_TARGET inline __m512d pow2s(__m256i e) {
  const __m512i biased = _mm512_cvtepi32_epi64(_mm256_add_epi32(e, _mm256_set1_epi32(1023)));
  return _mm512_castsi512_pd(_mm512_slli_epi64(biased, 52));
}

// Finisher::finish on eight lanes: sum (integers, exact) times 2^(m - F),
// rounded on the binary64 encoding where the result is normal (fast_round);
// other lanes through finish_slow, zero sums to +0 (zero_sum_result).
RPSIM_TILE_TARGET inline __m512d finish8(const Finisher& fin, __m512d sum, __m256i m) {
  const __m256i exponent = _mm256_sub_epi32(m, _mm256_set1_epi32(fin.align_bits));
  const __m512d v = _mm512_mul_pd(sum, pow2s(exponent));
  __m512i bits = _mm512_castpd_si512(v);
  const __m512i field_mask = _mm512_set1_epi64(0x7ff);
  const __m512i bias = _mm512_set1_epi64(1023);
  const __m512i e = _mm512_sub_epi64(_mm512_and_si512(_mm512_srli_epi64(bits, 52), field_mask), bias);
  __mmask8 slow = _mm512_cmplt_epi64_mask(e, _mm512_set1_epi64(fin.out_emin)) |
                  _mm512_cmpgt_epi64_mask(e, _mm512_set1_epi64(fin.out_emax));
  const int drop = 52 - fin.frac_bits;
  const __m512i low = _mm512_and_si512(bits, _mm512_set1_epi64(static_cast<long long>((1ull << drop) - 1)));
  bits = _mm512_sub_epi64(bits, low);
  if (fin.mode == RoundingMode::nearest_even) {
    const __m512i half = _mm512_set1_epi64(static_cast<long long>(1ull << (drop - 1)));
    const __m512i odd =
        _mm512_and_si512(_mm512_srli_epi64(bits, static_cast<unsigned>(drop)), _mm512_set1_epi64(1));
    const __mmask8 up =
        _mm512_cmpgt_epi64_mask(low, half) |
        (_mm512_cmpeq_epi64_mask(low, half) & _mm512_cmpeq_epi64_mask(odd, _mm512_set1_epi64(1)));
    bits = _mm512_mask_add_epi64(bits, up, bits, _mm512_set1_epi64(static_cast<long long>(1ull << drop)));
  }
  const __m512i e2 = _mm512_sub_epi64(_mm512_and_si512(_mm512_srli_epi64(bits, 52), field_mask), bias);
  slow |= _mm512_cmpgt_epi64_mask(e2, _mm512_set1_epi64(fin.out_emax));
  const __mmask8 zero = _mm512_cmp_pd_mask(sum, _mm512_setzero_pd(), _CMP_EQ_OQ);
  __m512d r = _mm512_mask_mov_pd(_mm512_castsi512_pd(bits), zero, _mm512_set1_pd(zero_sum_result()));
  slow &= static_cast<__mmask8>(~zero);
  if (slow) {
    alignas(64) double rs[kTile], ss[kTile];
    alignas(32) int es[kTile];
    _mm512_store_pd(rs, r);
    _mm512_store_pd(ss, sum);
    _mm256_store_si256(reinterpret_cast<__m256i*>(es), exponent);
    for (int l = 0; l < kTile; ++l)
      if (slow & (1u << l)) {
        const auto s = static_cast<std::int64_t>(ss[l]);
        rs[l] = fin.finish_slow(s < 0, s < 0 ? -s : s, es[l]);
      }
    r = _mm512_load_pd(rs);
  }
  return r;
}

// One aligned, truncated product term on eight lanes: trunc(a*b*scale),
// exact (a*b has at most 22 bits, the scaling is by a power of two).
RPSIM_TILE_TARGET inline __m512d term(double a, const double* b, __m512d scale) {
  const __m512d p = _mm512_mul_pd(_mm512_set1_pd(a), _mm512_loadu_pd(b));
  return _mm512_roundscale_pd(_mm512_mul_pd(p, scale), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
}

// run_step<false> on T tiles of eight lanes whose accumulators are finite:
// tile u's operands at bv + u*stride, be + u*stride. The tiles' chains are
// independent, and each tile sums its terms in two halves, so the additions'
// latency overlaps.
template <int T>
RPSIM_TILE_TARGET inline void steps8(const Finisher& fin, int n, const double* av, const int* ae,
                                     const double* bv, const int* be, std::size_t stride, __m512d* c) {
  __m256i m[T];
  for (int u = 0; u < T; ++u) m[u] = c_exponents(c[u], fin.out_emin);
  for (int t = 0; t < n; ++t) {
    const __m256i x = _mm256_set1_epi32(ae[t]);
    for (int u = 0; u < T; ++u)
      m[u] = _mm256_max_epi32(m[u], _mm256_add_epi32(x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                                            be + u * stride + std::size_t(t) * kTile))));
  }
  __m512d scale[T], s0[T], s1[T];
  constexpr int kTrunc = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
  for (int u = 0; u < T; ++u) {
    const __mmask8 all_zero = _mm256_cmplt_epi32_mask(m[u], _mm256_set1_epi32(kAllZeroThreshold));
    m[u] = _mm256_max_epi32(m[u], _mm256_set1_epi32(fin.align_floor));
    // All-zero lanes: every term is a zero, the sum +0 whatever the scale.
    scale[u] = _mm512_mask_mov_pd(pow2s(_mm256_sub_epi32(_mm256_set1_epi32(fin.align_bits), m[u])), all_zero,
                                  _mm512_set1_pd(1));
    s0[u] = _mm512_roundscale_pd(_mm512_mul_pd(c[u], scale[u]), kTrunc);
    s1[u] = _mm512_setzero_pd();
  }
  int t = 0;
  for (; t + 1 < n; t += 2)
    for (int u = 0; u < T; ++u) {
      s0[u] = _mm512_add_pd(s0[u], term(av[t], bv + u * stride + std::size_t(t) * kTile, scale[u]));
      s1[u] = _mm512_add_pd(s1[u], term(av[t + 1], bv + u * stride + std::size_t(t + 1) * kTile, scale[u]));
    }
  if (t < n)
    for (int u = 0; u < T; ++u)
      s0[u] = _mm512_add_pd(s0[u], term(av[t], bv + u * stride + std::size_t(t) * kTile, scale[u]));
  for (int u = 0; u < T; ++u) c[u] = finish8(fin, _mm512_add_pd(s0[u], s1[u]), m[u]);
}

// A step for lanes whose accumulator is not finite (after an overflow): the
// scalar step on the lane's operands.
RPSIM_TILE_TARGET __m512d step_special(const Finisher& fin, int n, const double* av, const int* ae,
                                       const double* bv, const int* be, __m512d c, __mmask8 special) {
  alignas(64) double cs[kTile], rs[kTile];
  _mm512_store_pd(cs, c);
  __m512d finite = _mm512_mask_mov_pd(c, special, _mm512_setzero_pd());
  steps8<1>(fin, n, av, ae, bv, be, 0, &finite);
  _mm512_store_pd(rs, finite);
  double lv[1024];
  int le[1024];
  for (int l = 0; l < kTile; ++l) {
    if (!(special & (1u << l))) continue;
    for (int t = 0; t < n; ++t) {
      lv[t] = bv[t * kTile + l];
      le[t] = be[t * kTile + l];
    }
    rs[l] = run_step<false>(fin, n, av, ae, lv, le, cs[l]);
  }
  return _mm512_load_pd(rs);
}

// The chains of T tiles (tile u's operands at bv + u*stride, be + u*stride,
// its accumulators at acc + 8u).
template <int T>
RPSIM_TILE_TARGET void chain_avx512(const Finisher& fin, const ChainPlan& plan, int s0, int s1,
                                    const double* av, const int* ae, const double* bv, const int* be,
                                    std::size_t stride, double* acc) {
  constexpr int kNotFinite = 0x01 | 0x08 | 0x10 | 0x80;  // QNaN, +inf, -inf, SNaN
  const bool after = fin.c_after;
  __m512d c[T], held[T];
  for (int u = 0; u < T; ++u) {
    c[u] = _mm512_loadu_pd(acc + u * kTile);
    held[u] = _mm512_setzero_pd();
  }
  for (int s = s0; s < s1; ++s) {
    const auto su = static_cast<std::size_t>(s);
    const int base = plan.begin[su];
    const int cnt = plan.begin[su + 1] - base;
    if (after && plan.first[su])
      for (int u = 0; u < T; ++u) {
        held[u] = c[u];
        c[u] = _mm512_set1_pd(-0.0);  // run_chain: the instruction starts from -0
      }
    const double* bt = bv + std::size_t(base) * kTile;
    const int* et = be + std::size_t(base) * kTile;
    __mmask8 special[T];
    bool any = false;
    for (int u = 0; u < T; ++u) any |= (special[u] = _mm512_fpclass_pd_mask(c[u], kNotFinite)) != 0;
    if (!any) {
      steps8<T>(fin, cnt, av + base, ae + base, bt, et, stride, c);
    } else {
      for (int u = 0; u < T; ++u)
        c[u] =
            step_special(fin, cnt, av + base, ae + base, bt + u * stride, et + u * stride, c[u], special[u]);
    }
    if (after && plan.last[su])
      for (int u = 0; u < T; ++u) {
        alignas(64) double x[kTile], h[kTile];
        _mm512_store_pd(x, c[u]);
        _mm512_store_pd(h, held[u]);
        for (int l = 0; l < kTile; ++l) x[l] = fin.add_after(x[l], h[l]);
        c[u] = _mm512_load_pd(x);
      }
  }
  for (int u = 0; u < T; ++u) _mm512_storeu_pd(acc + u * kTile, c[u]);
}

#endif

bool cpu_has_avx512() {
#if RPSIM_TILE_X86
  const CpuFeatures& c = cpu_features();
  return c.avx512f && c.avx512dq && c.avx512vl && c.fma;
#else
  return false;
#endif
}

std::atomic<bool> g_tiles{true};

}  // namespace

bool tile_kernel_usable(const Finisher& fin) {
  static const bool cpu = cpu_has_avx512();
  const auto mode = fin.mode;
  return cpu && g_tiles.load(std::memory_order_relaxed) &&
         (mode == RoundingMode::nearest_even || mode == RoundingMode::toward_zero) && fin.frac_bits >= 1 &&
         fin.frac_bits <= 51;
}

void run_chain_tiles(const Finisher& fin, const ChainPlan& plan, int s0, int s1, const double* av,
                     const int* ae, const double* bv, const int* be, std::size_t stride, int tiles,
                     double* acc) {
#if RPSIM_TILE_X86
  switch (tiles) {
    case 4: chain_avx512<4>(fin, plan, s0, s1, av, ae, bv, be, stride, acc); break;
    case 3: chain_avx512<3>(fin, plan, s0, s1, av, ae, bv, be, stride, acc); break;
    case 2: chain_avx512<2>(fin, plan, s0, s1, av, ae, bv, be, stride, acc); break;
    default: chain_avx512<1>(fin, plan, s0, s1, av, ae, bv, be, stride, acc);
  }
#else
  (void)fin, (void)plan, (void)s0, (void)s1, (void)av, (void)ae, (void)bv, (void)be, (void)stride,
      (void)tiles, (void)acc;
  std::abort();  // tile_kernel_usable() is false: never called
#endif
}

}  // namespace rpsim::sim::tc_detail

namespace rpsim::sim {

void set_gemm_isa(ArrayIsa isa) {
  tc_detail::g_tiles.store(isa == ArrayIsa::best || isa == ArrayIsa::avx512);
}

const char* gemm_kernel_isa() {
  static const bool cpu = tc_detail::cpu_has_avx512();
  return cpu && tc_detail::g_tiles.load() ? "avx512" : "portable";
}

}  // namespace rpsim::sim
