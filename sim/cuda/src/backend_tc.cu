// The block-FMA GEMM under a kernel schedule on the device (a tc: model is
// the one-chain schedule): the CPU's plan (tensor_core_chain.hpp ChainPlan:
// the products of K in the order the steps take them, chunk by chunk) is
// copied to the device; a block of 16 x 16 output elements walks it in tiles
// of whole steps, each tile's operands of 16 rows of A and 16 columns of B
// converted and decoded once into shared memory in plan order, so that a
// step reads its operands where the CPU's run_chain reads them. Chunks fold
// into their split-K slices and the result through schedule_fold.hpp, as
// KernelFold does. The arithmetic is tensor_core_step.hpp's.
#include "backend_device.cuh"
#include "rpsim/accumulation/schedule_fold.hpp"
#include "rpsim/accumulation/tensor_core_step.hpp"

namespace rpsim::cuda::backend {
namespace {

// One operand as the CPU's gemm() sees it: converted to the input format when
// the schedule stores another (round_values with input_rounding), then
// decoded for the alignment.
__device__ sim::tc_detail::Operand load_operand(const TcGemmArgs& x, double v, bool b_side) {
  if (x.convert) {
    RoundingDesc r;
    r.mode = x.input_rounding;
    Flags fl = 0;
    v = hd::double_of(hd::widen_to_binary64(x.input, hd::round_binary64(x.input, v, r, fl)));
  }
  return sim::tc_detail::decode(x.p, v, b_side);
}

// One element's chain state across tiles. Plain (one chunk, no fold: a tc:
// model's chain) keeps no split-K partials: the 64 of a schedule's fold took
// the kernel to 193 registers a thread and 12.5 % occupancy on an H200
// (Nsight Compute, 2026-11-29, tc:h100:fp16:fp32 1024^3); plain it fits in 85
// (three blocks an SM, no spills).
template <bool Plain>
struct TcElement {
  double acc = 0, held = 0, c = 0, result = 0;
  double partials[Plain ? 1 : kTcMaxSlices];
  int q = 0;  // the chunk being run

  __device__ double chunk_start(const TcGemmArgs& x, int chunk) const {
    return chunk == 0 && x.c_first ? c : 0.0;
  }
  // Closes every chunk that ends at or before step s (all of them for s past
  // the last step) into its slice's partial, opening the next.
  __device__ void close_until(const TcGemmArgs& x, int s) {
    while (q < x.chunks && x.chunk_step[q + 1] <= s) {
      if constexpr (Plain) {
        result = acc;
      } else {
        const int slice = x.chunk_slice[q];
        const bool first_of_slice = q == 0 || x.chunk_slice[q - 1] != slice;
        sim::fold_detail::add_chunk(x.fold, first_of_slice, acc, partials[slice]);
      }
      ++q;
      if (q < x.chunks) acc = chunk_start(x, q);
    }
  }
};

template <bool Plain>
__global__ void __launch_bounds__(kTcTile* kTcTile, Plain ? 3 : 1) tc_gemm_kernel(TcGemmArgs x) {
  __shared__ double av[kTcTile][kTcPositions + 1], bv[kTcTile][kTcPositions + 1];
  __shared__ int ae[kTcTile][kTcPositions + 1], be[kTcTile][kTcPositions + 1];
  const int ty = threadIdx.y, tx = threadIdx.x, tid = ty * kTcTile + tx;
  const std::int64_t i0 = std::int64_t(blockIdx.y) * kTcTile, j0 = std::int64_t(blockIdx.x) * kTcTile;
  const std::int64_t i = i0 + ty, j = j0 + tx;
  const bool mine = i < x.g.m && j < x.g.n;
  TcElement<Plain> e;
  if constexpr (!Plain)
    for (int s = 0; s < x.slices; ++s) e.partials[s] = 0;
  e.c = mine && x.c.data ? at(x.c, i, j) : 0.0;
  e.acc = e.chunk_start(x, 0);
  for (int u = 0; u < x.tiles; ++u) {
    const int s0 = x.tile_step[u], s1 = x.tile_step[u + 1];
    const int t0 = x.begin[s0], count = x.begin[s1] - t0;
    for (int w = tid; w < kTcTile * count; w += kTcTile * kTcTile) {
      const int r = w / count, t = w % count, k = x.order[t0 + t];
      const auto oa = load_operand(x, i0 + r < x.g.m ? at(x.a, i0 + r, k) : 0.0, false);
      const auto ob = load_operand(x, j0 + r < x.g.n ? at(x.b, k, j0 + r) : 0.0, true);
      av[r][t] = oa.value;
      ae[r][t] = oa.exponent;
      bv[r][t] = ob.value;
      be[r][t] = ob.exponent;
    }
    __syncthreads();
    if (mine) {
      for (int s = s0; s < s1; ++s) {
        e.close_until(x, s);
        if (x.p.c_after && x.first[s]) {
          e.held = e.acc;
          e.acc = -0.0;  // the instruction's steps start from -0; C joins after them
        }
        const int at_pos = x.begin[s] - t0, n = x.begin[s + 1] - x.begin[s];
        e.acc = sim::tc_detail::run_step<true>(x.p, n, &av[ty][at_pos], &ae[ty][at_pos], &bv[tx][at_pos],
                                               &be[tx][at_pos], e.acc);
        if (x.p.c_after && x.last[s]) e.acc = sim::tc_detail::add_after(x.p, e.acc, e.held);
      }
    }
    __syncthreads();
  }
  if (!mine) return;
  e.close_until(x, 0x7fffffff);
  if constexpr (!Plain)
    e.result = sim::fold_detail::fold_result(x.fold, e.partials, x.slices, e.c, scale_a_at(x.scales, i),
                                             scale_b_at(x.scales, j));
  put(x.d, i, j, e.result);
}

}  // namespace

void launch_tc_gemm(const TcGemmArgs& x, void* stream) {
  const dim3 grid(unsigned((x.g.n + kTcTile - 1) / kTcTile), unsigned((x.g.m + kTcTile - 1) / kTcTile));
  if (x.plain)
    tc_gemm_kernel<true><<<grid, dim3(kTcTile, kTcTile), 0, as_stream(stream)>>>(x);
  else
    tc_gemm_kernel<false><<<grid, dim3(kTcTile, kTcTile), 0, as_stream(stream)>>>(x);
  check_launch("tc_gemm_kernel");
}

}  // namespace rpsim::cuda::backend
