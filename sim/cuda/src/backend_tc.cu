// The block-FMA GEMM under a kernel schedule on the device (a tc: model is
// the one-chain schedule): the CPU's plan (tensor_core_chain.hpp ChainPlan:
// the products of K in the order the steps take them, chunk by chunk) is
// copied to the device; a prepass converts and decodes every operand once,
// A's rows and B's columns in plan order; a block of 16 x 16 output elements
// walks the plan in tiles of whole steps, each tile's operands of 16 rows of
// A and 16 columns of B copied into shared memory, so that a step reads its
// operands where the CPU's run_chain reads them. Chunks fold
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

// One step of n products. A step count the instruction tables use most
// (4, 8, 16, 32 products) is passed as a literal, so that nvcc unrolls the
// step's two loops whole: with n known only at run time, the remainder
// dispatch and address set-up of the unrolled loops were about two thirds of
// a 16-product step's 576 instructions (SASS for sm_90a, tc:h100:fp16:fp32,
// H200, 2026-11-30). The checked step (a tile with an infinity or NaN) stays
// generic.
template <bool Checked>
__device__ double step_of(const sim::TcStep& p, int n, const double* av, const int* ae, const double* bv,
                          const int* be, double c) {
  using sim::tc_detail::run_step;
  if constexpr (!Checked) {
    switch (n) {
      case 4: return run_step<false>(p, 4, av, ae, bv, be, c);
      case 8: return run_step<false>(p, 8, av, ae, bv, be, c);
      case 16: return run_step<false>(p, 16, av, ae, bv, be, c);
      case 32: return run_step<false>(p, 32, av, ae, bv, be, c);
      default: break;
    }
  }
  return run_step<Checked>(p, n, av, ae, bv, be, c);
}

// One element's chain state across tiles. Plain (one chunk, no fold: a tc:
// model's chain) keeps no split-K partials: the 64 of a schedule's fold took
// the kernel to 193 registers a thread and 12.5 % occupancy on an H200
// (Nsight Compute, 2026-11-29, tc:h100:fp16:fp32 1024^3). Plain it runs four
// blocks an SM in 64 registers (an 8-byte spill; 48 % occupancy, 2.83
// instructions a cycle, 2026-11-30): 77.5 ms for 4096^3 where three blocks in
// 80 registers took 89.3 ms; five would spill 88 bytes.
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
  // Steps s0 ... s1 - 1 of a shared-memory tile that starts at plan position
  // t0: this element's row of A and column of B, decoded (av/ae, bv/be).
  template <bool Checked>
  __device__ void run_steps(const TcGemmArgs& x, int s0, int s1, int t0, const double* av, const int* ae,
                            const double* bv, const int* be) {
    for (int s = s0; s < s1; ++s) {
      close_until(x, s);
      if (x.p.c_after && x.first[s]) {
        held = acc;
        acc = -0.0;  // the instruction's steps start from -0; C joins after them
      }
      const int at = x.begin[s] - t0, n = x.begin[s + 1] - x.begin[s];
      acc = step_of<Checked>(x.p, n, av + at, ae + at, bv + at, be + at, acc);
      if (x.p.c_after && x.last[s]) acc = sim::tc_detail::add_after(x.p, acc, held);
    }
  }
};

template <bool Plain>
__global__ void __launch_bounds__(kTcTile* kTcTile, Plain ? 4 : 1) tc_gemm_kernel(TcGemmArgs x) {
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
    bool finite = true;
    // Copies of the prepass's decoded operands, consecutive threads on
    // consecutive positions of one row (coalesced). A row past the matrix is
    // not copied: only threads with no element of their own would read it.
    // The decoding here, per block, with the row and position found by a
    // division by the tile's length, had been about a third of the kernel's
    // instructions (SASS, tc:h100:fp16:fp32, H200, 2026-11-30).
    for (int w = tid; w < kTcTile * kTcPositions; w += kTcTile * kTcTile) {
      const int r = w / kTcPositions, t = w % kTcPositions;
      if (t >= count) continue;
      if (i0 + r < x.g.m) {
        const std::int64_t o = (i0 + r) * x.positions + t0 + t;
        const double v = x.a_value[o];
        av[r][t] = v;
        ae[r][t] = x.a_exponent[o];
        finite = finite && hd::is_finite(v);
      }
      if (j0 + r < x.g.n) {
        const std::int64_t o = (j0 + r) * x.positions + t0 + t;
        const double v = x.b_value[o];
        bv[r][t] = v;
        be[r][t] = x.b_exponent[o];
        finite = finite && hd::is_finite(v);
      }
    }
    // A tile of finite operands runs the unchecked step (run_step<false>
    // still checks the accumulator): the checked one's scan of every operand
    // for infinities and NaN was a third of a step's instructions (PTX,
    // tc:h100:fp16:fp32, 16 products a step).
    const bool tile_finite = __syncthreads_and(finite) != 0;
    if (mine && tile_finite) e.template run_steps<false>(x, s0, s1, t0, av[ty], ae[ty], bv[tx], be[tx]);
    if (mine && !tile_finite) e.template run_steps<true>(x, s0, s1, t0, av[ty], ae[ty], bv[tx], be[tx]);
    __syncthreads();
  }
  if (!mine) return;
  e.close_until(x, 0x7fffffff);
  if constexpr (!Plain)
    e.result = sim::fold_detail::fold_result(x.fold, e.partials, x.slices, e.c, scale_a_at(x.scales, i),
                                             scale_b_at(x.scales, j));
  put(x.d, i, j, e.result);
}

// The prepass: rows x positions operands of A (b_side false: A's row r,
// position t is A(r, order[t])) or B (B's column r), converted and decoded.
__global__ void tc_decode_kernel(TcGemmArgs x, bool b_side, std::int64_t rows, double* value, int* exponent) {
  const std::int64_t n = rows * x.positions;
  for (std::int64_t w = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < n;
       w += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = w / x.positions;
    const int k = x.order[w % x.positions];
    const auto o = load_operand(x, b_side ? at(x.b, k, r) : at(x.a, r, k), b_side);
    value[w] = o.value;
    exponent[w] = o.exponent;
  }
}

// The prepass's device arrays, freed in stream order.
class Decoded {
 public:
  Decoded(std::size_t entries, void* stream) : stream_(as_stream(stream)) {
    if (entries)
      check_cuda(cudaMallocAsync(&buffer_, entries * (sizeof(double) + sizeof(int)), stream_),
                 "cudaMallocAsync (decoded operands)");
  }
  ~Decoded() {
    if (buffer_) cudaFreeAsync(buffer_, stream_);
  }
  Decoded(const Decoded&) = delete;
  Decoded& operator=(const Decoded&) = delete;
  double* values() const { return static_cast<double*>(buffer_); }

 private:
  cudaStream_t stream_;
  void* buffer_ = nullptr;
};

}  // namespace

void launch_tc_gemm(const TcGemmArgs& args, void* stream) {
  TcGemmArgs x = args;
  const std::size_t na = std::size_t(x.g.m) * std::size_t(x.positions);
  const std::size_t nb = std::size_t(x.g.n) * std::size_t(x.positions);
  const Decoded decoded(na + nb, stream);
  if (na + nb) {
    double* values = decoded.values();
    int* exponents = reinterpret_cast<int*>(values + na + nb);
    x.a_value = values;
    x.b_value = values + na;
    x.a_exponent = exponents;
    x.b_exponent = exponents + na;
    if (na)
      tc_decode_kernel<<<grid_for(na), kThreads, 0, as_stream(stream)>>>(x, false, x.g.m, values, exponents);
    if (nb)
      tc_decode_kernel<<<grid_for(nb), kThreads, 0, as_stream(stream)>>>(x, true, x.g.n, values + na,
                                                                         exponents + na);
    check_launch("tc_decode_kernel");
  }
  const dim3 grid(unsigned((x.g.n + kTcTile - 1) / kTcTile), unsigned((x.g.m + kTcTile - 1) / kTcTile));
  if (x.plain)
    tc_gemm_kernel<true><<<grid, dim3(kTcTile, kTcTile), 0, as_stream(stream)>>>(x);
  else
    tc_gemm_kernel<false><<<grid, dim3(kTcTile, kTcTile), 0, as_stream(stream)>>>(x);
  check_launch("tc_gemm_kernel");
}

}  // namespace rpsim::cuda::backend
