// cuBLAS's CUDA-core kernels (kernel_simt.hpp).
//
// Evidence: bitequiv (facebookexperimental/triton, bitequiv/cublas_match/
// kernels.py, its SIMT section), which reproduces cuBLAS's gemmSN_NN_kernel
// (cuBLASLt ALGO_ID 11), magma_sgemmEx_kernel (16), gemv2T/gemv2N_kernel (13)
// and dot_kernel + reduce_1Block_kernel<float, 128, 7> (14) bit for bit on
// GB200 / GB300 (sm_100); the facts below are theirs, the code ours. Not yet
// measured on an H100 or H200: which thin shapes take which kernel, and the
// thread counts, sub-blocks and lane layouts each instance uses, are owed to
// a GPU session (the recorded kernel names and cuBLASLt's ALGO_ID say the
// family; the numbers are fields of the schedule).
//
// Every kernel keeps one binary32 accumulator per thread and updates it with
// an FFMA. fp16 and bf16 products are exact in binary32, so fma(a, b, acc)
// and acc + a*b are the same bits for them and only the association order
// matters; binary32 inputs (SGEMM) round once per FFMA, as fma does.
#include "kernel_simt.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernel_fold.hpp"

namespace rpsim::sim {

namespace {

struct Operands {
  const double *a, *b;
  std::ptrdiff_t as, bs;
  long k0, k1;
  float ffma(long k, float acc) const {
    return std::fma(static_cast<float>(a[k * as]), static_cast<float>(b[k * bs]), acc);
  }
  // An ascending chain over [lo, hi) from zero.
  float chain(long lo, long hi) const {
    float acc = 0;
    for (long k = lo; k < hi; ++k) acc = ffma(k, acc);
    return acc;
  }
};

// W lane values: in lane order, or by a count-down butterfly (the classic
// __shfl_down reduction: x[l] += x[l + off] for off = W/2, ..., 1).
float combine(std::vector<float>& lane, LaneCombine how) {
  if (how == LaneCombine::sequential) {
    float t = lane[0];
    for (std::size_t j = 1; j < lane.size(); ++j) t += lane[j];
    return t;
  }
  for (std::size_t off = lane.size() / 2; off >= 1; off /= 2)
    for (std::size_t l = 0; l < off; ++l) lane[l] += lane[l + off];
  return lane[0];
}

// gemmSN (ALGO_ID 11) and magma_sgemmEx (16, one thread, one sub-block):
// three levels, each left to right. Thread t owns [t*CH, (t+1)*CH), CH =
// ceil(L / threads), cut into sub-blocks of simt_sub, each an ascending
// chain; the sub-block sums go into the thread's sum, the threads' sums into
// the total (bitequiv: level 2 bites once a thread's chunk exceeds SUB, K >
// 512 for the instance they measured).
float gemmsn(const KernelSchedule& s, const Operands& x) {
  const long len = x.k1 - x.k0, threads = s.simt_threads;
  const long ch = (len + threads - 1) / threads;
  const long sub = s.simt_sub > 0 ? s.simt_sub : std::max(ch, 1L);
  float total = 0;
  for (long t = 0; t < threads; ++t) {
    const long lo = x.k0 + t * ch, hi = std::min(lo + ch, x.k1);
    float part = 0;
    for (long base = lo; base < hi; base += sub) part += x.chain(base, std::min(base + sub, hi));
    total += part;
  }
  return total;
}

// gemv2T / gemv2N (ALGO_ID 13): lane l takes, in tile t, the V products at
// t*V*W + l*V; simt_sub tiles form a chunk summed on its own (tile, then
// vector element, ascending), the chunk sums added in order; the W lanes
// combined as simt_combine says.
float gemv(const KernelSchedule& s, const Operands& x) {
  const long w = s.simt_threads, v = s.simt_vector, tile = v * w;
  const long tiles = (x.k1 - x.k0 + tile - 1) / tile;
  const long per = s.simt_sub > 0 ? s.simt_sub : std::max(tiles, 1L);
  std::vector<float> lane(static_cast<std::size_t>(w), 0.0f);
  for (long c = 0; c * per < tiles; ++c)
    for (long l = 0; l < w; ++l) {
      float acc = 0;
      for (long t = c * per; t < std::min((c + 1) * per, tiles); ++t)
        for (long e = 0; e < v; ++e) {
          const long k = x.k0 + t * tile + l * v + e;
          if (k < x.k1) acc = x.ffma(k, acc);
        }
      auto& out = lane[static_cast<std::size_t>(l)];
      out = c == 0 ? acc : out + acc;
    }
  return combine(lane, s.simt_combine);
}

// gemv2N<..., 128, 32, 4, 4, 1, false> (ALGO_ID 13, CUSTOM_OPTION 5): lane l
// takes the contiguous [l*S, (l+1)*S), S = ceil(L / W), in chunks of
// simt_sub (16 there), each an ascending chain, the chunk sums added in
// order; the lanes as simt_combine says (in order there). bitequiv's example:
// K = 581, S = 19, lane 0 = (x0 + ... + x15) + (x16 + x17 + x18).
float gemv_slices(const KernelSchedule& s, const Operands& x) {
  const long w = s.simt_threads, len = x.k1 - x.k0, per = (len + w - 1) / w;
  const long chunk = s.simt_sub > 0 ? s.simt_sub : std::max(per, 1L);
  std::vector<float> lane(static_cast<std::size_t>(w), 0.0f);
  for (long l = 0; l < w; ++l) {
    const long lo = x.k0 + l * per, hi = std::min(lo + per, x.k1);
    for (long base = lo; base < hi; base += chunk) {
      const float c = x.chain(base, std::min(base + chunk, hi));
      auto& out = lane[static_cast<std::size_t>(l)];
      out = base == lo ? c : out + c;
    }
  }
  return combine(lane, s.simt_combine);
}

// reduce_1Block_kernel<float, 128, 7>: the blocks' partials p, 128 threads:
// q[t] = p[t] + p[t+128] + ... (missing ones 0), q[t] += q[t+64], q[t] +=
// q[t+32], u[j] = q[j] + q[4+j] + ... + q[28+j], total ((u0+u1)+u2)+u3.
float reduce_1block(const std::vector<float>& p) {
  std::vector<float> q(128, 0.0f);
  for (std::size_t t = 0; t < 128; ++t)
    for (std::size_t i = t; i < p.size(); i += 128) q[t] = i == t ? p[i] : q[t] + p[i];
  for (std::size_t t = 0; t < 64; ++t) q[t] += q[t + 64];
  for (std::size_t t = 0; t < 32; ++t) q[t] += q[t + 32];
  float u[4];
  for (std::size_t j = 0; j < 4; ++j) {
    u[j] = q[j];
    for (std::size_t g = 1; g < 8; ++g) u[j] += q[4 * g + j];
  }
  return ((u[0] + u[1]) + u[2]) + u[3];
}

// dot_kernel (ALGO_ID 14): NB = split_k blocks own the tiles of V*128
// products in turn (tile g*NB + blk), not contiguous slices; thread thr keeps
// V chains (chain e: the product thr*V + e of each of its block's tiles,
// ascending), added at the end; the 128 threads by a count-down butterfly;
// the blocks' partials by reduce_1Block (bitequiv: all three change bits).
float dot(const KernelSchedule& s, const Operands& x) {
  const long nb = s.split_k, v = s.simt_vector, tile = v * 128, len = x.k1 - x.k0;
  std::vector<float> p(static_cast<std::size_t>(nb));
  std::vector<float> threads(128);
  for (long blk = 0; blk < nb; ++blk) {
    std::fill(threads.begin(), threads.end(), 0.0f);
    for (long e = 0; e < v; ++e)
      for (long thr = 0; thr < 128; ++thr) {
        float acc = 0;
        for (long g = 0; (g * nb + blk) * tile < len; ++g) {
          const long k = x.k0 + (g * nb + blk) * tile + thr * v + e;
          if (k < x.k1) acc = x.ffma(k, acc);
        }
        threads[static_cast<std::size_t>(thr)] += acc;
      }
    p[static_cast<std::size_t>(blk)] = combine(threads, LaneCombine::butterfly);
  }
  return nb == 1 ? p[0] : reduce_1block(p);
}

}  // namespace

double simt_chunk(const KernelSchedule& s, const double* a, std::ptrdiff_t as, const double* b,
                  std::ptrdiff_t bs, long k0, long k1) {
  const Operands x{a, b, as, bs, k0, k1};
  switch (s.simt) {
    case SimtOrder::gemmsn: return gemmsn(s, x);
    case SimtOrder::gemv: return gemv(s, x);
    case SimtOrder::gemv_slices: return gemv_slices(s, x);
    case SimtOrder::dot: return dot(s, x);
    case SimtOrder::none: break;
  }
  return x.chain(k0, k1);
}

Matrix gemm_simt(const KernelSchedule& s, const Matrix& a, const Matrix& b, const Matrix& c, int threads,
                 const TensorScales& scales) {
  const auto chunks = s.chunks(static_cast<int>(a.cols()));
  const KernelFold fold(s, chunks, scales.any());
  Matrix d(a.rows(), b.cols());
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
  {
    std::vector<double> partials(static_cast<std::size_t>(fold.slices()));
#pragma omp for schedule(dynamic, 4)
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      for (Eigen::Index j = 0; j < b.cols(); ++j) {
        for (const KChunk& ch : chunks)
          partials[static_cast<std::size_t>(ch.slice)] =
              simt_chunk(s, a.data() + i, a.rows(), b.col(j).data(), 1, ch.begin, ch.end);
        d(i, j) = fold.result(partials.data(), c(i, j), scales.at(scales.a, i), scales.at(scales.b, j));
      }
  }
  return d;
}

}  // namespace rpsim::sim
