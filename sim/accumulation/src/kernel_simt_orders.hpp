// The sums of cuBLAS's CUDA-core kernels (kernel_simt.hpp), written once over
// an operand view X: X::V is the accumulator, X::ffma(k, acc) one FFMA of
// product k, V + V one binary32 add, V{} zero. V is one binary32
// (kernel_simt.cpp) or a vector of them for a block of outputs
// (kernel_simt_avx512.cpp): every lane takes the same steps in the same
// order, so each output gets the same bits either way.
//
// Internal to sim/accumulation. File-local to each includer (an unnamed
// namespace): kernel_simt_avx512.cpp instantiates these inside its AVX-512
// target region, so no instance may be shared with other files. For that
// reason too this header uses no standard-library template.
#pragma once

#include "kernel_simt.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"

namespace rpsim::sim {
namespace {  // NOLINT(google-build-namespaces): see above
namespace simt_orders {

inline long lmin(long a, long b) {
  return a < b ? a : b;
}
inline long lmax(long a, long b) {
  return a > b ? a : b;
}

// An ascending chain over [lo, hi) from zero.
template <class X>
typename X::V chain(const X& x, long lo, long hi) {
  typename X::V acc{};
  for (long k = lo; k < hi; ++k) acc = x.ffma(k, acc);
  return acc;
}

// W lane values: in lane order, or by a count-down butterfly (the classic
// __shfl_down reduction: x[l] += x[l + off] for off = W/2, ..., 1).
template <class V>
V combine(V* lane, long w, LaneCombine how) {
  if (how == LaneCombine::sequential) {
    V t = lane[0];
    for (long j = 1; j < w; ++j) t = t + lane[j];
    return t;
  }
  for (long off = w / 2; off >= 1; off /= 2)
    for (long l = 0; l < off; ++l) lane[l] = lane[l] + lane[l + off];
  return lane[0];
}

// gemmSN (ALGO_ID 11) and magma_sgemmEx (16, one thread, one sub-block):
// three levels, each left to right. Thread t owns [t*CH, (t+1)*CH), CH =
// ceil(L / threads), cut into sub-blocks of simt_sub, each an ascending
// chain; the sub-block sums go into the thread's sum, the threads' sums into
// the total (bitequiv: level 2 bites once a thread's chunk exceeds SUB, K >
// 512 for the instance they measured).
template <class X>
typename X::V gemmsn(const KernelSchedule& s, const X& x) {
  const long len = x.k1 - x.k0, threads = s.simt_threads;
  const long ch = (len + threads - 1) / threads;
  const long sub = s.simt_sub > 0 ? s.simt_sub : lmax(ch, 1L);
  typename X::V total{};
  for (long t = 0; t < threads; ++t) {
    const long lo = x.k0 + t * ch, hi = lmin(lo + ch, x.k1);
    typename X::V part{};
    for (long base = lo; base < hi; base += sub) part = part + chain(x, base, lmin(base + sub, hi));
    total = total + part;
  }
  return total;
}

// gemv2T / gemv2N (ALGO_ID 13): lane l takes, in tile t, the V products at
// t*V*W + l*V; simt_sub tiles form a chunk summed on its own (tile, then
// vector element, ascending), the chunk sums added in order; the W lanes
// combined as simt_combine says.
template <class X>
typename X::V gemv(const KernelSchedule& s, const X& x, typename X::V* lane) {
  const long w = s.simt_threads, v = s.simt_vector, tile = v * w;
  const long tiles = (x.k1 - x.k0 + tile - 1) / tile;
  const long per = s.simt_sub > 0 ? s.simt_sub : lmax(tiles, 1L);
  for (long l = 0; l < w; ++l) lane[l] = {};
  for (long c = 0; c * per < tiles; ++c)
    for (long l = 0; l < w; ++l) {
      typename X::V acc{};
      for (long t = c * per; t < lmin((c + 1) * per, tiles); ++t)
        for (long e = 0; e < v; ++e) {
          const long k = x.k0 + t * tile + l * v + e;
          if (k < x.k1) acc = x.ffma(k, acc);
        }
      lane[l] = c == 0 ? acc : lane[l] + acc;
    }
  return combine(lane, w, s.simt_combine);
}

// gemv2N<..., 128, 32, 4, 4, 1, false> (ALGO_ID 13, CUSTOM_OPTION 5): lane l
// takes the contiguous [l*S, (l+1)*S), S = ceil(L / W), in chunks of
// simt_sub (16 there), each an ascending chain, the chunk sums added in
// order; the lanes as simt_combine says (in order there). bitequiv's example:
// K = 581, S = 19, lane 0 = (x0 + ... + x15) + (x16 + x17 + x18).
template <class X>
typename X::V gemv_slices(const KernelSchedule& s, const X& x, typename X::V* lane) {
  const long w = s.simt_threads, len = x.k1 - x.k0, per = (len + w - 1) / w;
  const long chunk = s.simt_sub > 0 ? s.simt_sub : lmax(per, 1L);
  for (long l = 0; l < w; ++l) {
    lane[l] = {};
    const long lo = x.k0 + l * per, hi = lmin(lo + per, x.k1);
    for (long base = lo; base < hi; base += chunk) {
      const typename X::V c = chain(x, base, lmin(base + chunk, hi));
      lane[l] = base == lo ? c : lane[l] + c;
    }
  }
  return combine(lane, w, s.simt_combine);
}

// reduce_1Block_kernel<float, 128, 7>: the blocks' partials p, 128 threads:
// q[t] = p[t] + p[t+128] + ... (missing ones 0), q[t] += q[t+64], q[t] +=
// q[t+32], u[j] = q[j] + q[4+j] + ... + q[28+j], total ((u0+u1)+u2)+u3.
template <class V>
V reduce_1block(const V* p, long n, V* q) {
  for (long t = 0; t < 128; ++t) {
    q[t] = {};
    for (long i = t; i < n; i += 128) q[t] = i == t ? p[i] : q[t] + p[i];
  }
  for (long t = 0; t < 64; ++t) q[t] = q[t] + q[t + 64];
  for (long t = 0; t < 32; ++t) q[t] = q[t] + q[t + 32];
  V u[4];
  for (long j = 0; j < 4; ++j) {
    u[j] = q[j];
    for (long g = 1; g < 8; ++g) u[j] = u[j] + q[4 * g + j];
  }
  return ((u[0] + u[1]) + u[2]) + u[3];
}

// dot_kernel (ALGO_ID 14): NB = split_k blocks own the tiles of V*128
// products in turn (tile g*NB + blk), not contiguous slices; thread thr keeps
// V chains (chain e: the product thr*V + e of each of its block's tiles,
// ascending), added at the end; the 128 threads by a count-down butterfly;
// the blocks' partials by reduce_1Block (bitequiv: all three change bits).
// scratch: simt_scratch(s) accumulators.
template <class X>
typename X::V dot(const KernelSchedule& s, const X& x, typename X::V* scratch) {
  const long nb = s.split_k, v = s.simt_vector, tile = v * 128, len = x.k1 - x.k0;
  typename X::V *threads = scratch, *q = scratch + 128, *p = scratch + 256;
  for (long blk = 0; blk < nb; ++blk) {
    for (long thr = 0; thr < 128; ++thr) threads[thr] = {};
    for (long e = 0; e < v; ++e)
      for (long thr = 0; thr < 128; ++thr) {
        typename X::V acc{};
        for (long g = 0; (g * nb + blk) * tile < len; ++g) {
          const long k = x.k0 + (g * nb + blk) * tile + thr * v + e;
          if (k < x.k1) acc = x.ffma(k, acc);
        }
        threads[thr] = threads[thr] + acc;
      }
    p[blk] = combine(threads, 128, LaneCombine::butterfly);
  }
  return nb == 1 ? p[0] : reduce_1block(p, nb, q);
}

// The partial of products [x.k0, x.k1) under s.simt (none: one ascending
// chain); scratch: simt_scratch(s) accumulators.
template <class X>
typename X::V run(const KernelSchedule& s, const X& x, typename X::V* scratch) {
  switch (s.simt) {
    case SimtOrder::gemmsn: return gemmsn(s, x);
    case SimtOrder::gemv: return gemv(s, x, scratch);
    case SimtOrder::gemv_slices: return gemv_slices(s, x, scratch);
    case SimtOrder::dot: return dot(s, x, scratch);
    case SimtOrder::none: break;
  }
  return chain(x, x.k0, x.k1);
}

}  // namespace simt_orders
}  // namespace
}  // namespace rpsim::sim
