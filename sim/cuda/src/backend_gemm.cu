// The CUDA backend's GEMM kernels other than the block-FMA schedule
// (backend_tc.cu): each output element runs the shared per-element code
// (accumulator_ops.hpp, tensor_core_instruction.hpp); the kernels add only
// indexing, tiling and launch.
#include "backend_device.cuh"
#include "rpsim/accumulation/accumulator_ops.hpp"
#include "rpsim/accumulation/tensor_core_instruction.hpp"

namespace rpsim::cuda::backend {
namespace {

// sequential:FMT:RND (unfused): acc_detail::sequential per element, stream i*N + j.
template <class T>
__global__ void sequential_kernel(sim::AccumulatorOps ops, GemmShape g, DMat a, DMat b, DMat c, DMat d) {
  const std::int64_t i = std::int64_t(blockIdx.y) * blockDim.y + threadIdx.y;
  const std::int64_t j = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= g.m || j >= g.n) return;
  ops.stream = std::uint64_t(i) * std::uint64_t(g.n) + std::uint64_t(j);
  const T* ap = static_cast<const T*>(a.data) + i * a.rs;
  const T* bp = static_cast<const T*>(b.data) + j * b.cs;
  const double cv = c.data ? at(c, i, j) : 0.0;
  put(d, i, j, sim::acc_detail::sequential(ops, ap, a.cs, bp, b.rs, std::size_t(g.k), cv));
}

// binary32 / binary64 to nearest even on the device's own operations, never
// fused: accumulator_ops.hpp's f32 / f64 paths, which are the CPU's native
// kernels too (sim/train native_matmul.cpp: each c(i, j) sees its K terms in
// order, one product and one addition each, from zero). Tiles of A and B in
// shared memory; per element the order over K is k = 0, 1, ...
constexpr int kNativeTile = 16;

__device__ inline float native_mul(float x, float y) {
  return __fmul_rn(x, y);
}
__device__ inline float native_add(float x, float y) {
  return __fadd_rn(x, y);
}
__device__ inline double native_mul(double x, double y) {
  return __dmul_rn(x, y);
}
__device__ inline double native_add(double x, double y) {
  return __dadd_rn(x, y);
}

template <class T>
__global__ void native_kernel(GemmShape g, DMat a, DMat b, DMat c, DMat d) {
  __shared__ T as[kNativeTile][kNativeTile + 1], bs[kNativeTile][kNativeTile + 1];
  const int ty = threadIdx.y, tx = threadIdx.x;
  const std::int64_t i = std::int64_t(blockIdx.y) * kNativeTile + ty;
  const std::int64_t j = std::int64_t(blockIdx.x) * kNativeTile + tx;
  // s = C rounded to the accumulator (accumulator_ops.hpp sequential).
  T acc = T(0);
  if (i < g.m && j < g.n && c.data) acc = static_cast<T>(at(c, i, j));
  const T* ap = static_cast<const T*>(a.data);
  const T* bp = static_cast<const T*>(b.data);
  for (std::int64_t k0 = 0; k0 < g.k; k0 += kNativeTile) {
    as[ty][tx] = i < g.m && k0 + tx < g.k ? ap[i * a.rs + (k0 + tx) * a.cs] : T(0);
    bs[ty][tx] = k0 + ty < g.k && j < g.n ? bp[(k0 + ty) * b.rs + j * b.cs] : T(0);
    __syncthreads();
    const int kk = g.k - k0 < kNativeTile ? int(g.k - k0) : kNativeTile;
    for (int t = 0; t < kk; ++t) acc = native_add(acc, native_mul(as[ty][t], bs[t][tx]));
    __syncthreads();
  }
  if (i < g.m && j < g.n) put(d, i, j, double(acc));
}

// fma:binary32|binary64:rne and the fma_chain datapath (FP64 MMA, AMD f32
// mfma): acc = fma(a_k, b_k, acc) from C, one rounding each.
template <class T>
__global__ void fma_chain_kernel(GemmShape g, DMat a, DMat b, DMat c, DMat d) {
  const std::int64_t i = std::int64_t(blockIdx.y) * blockDim.y + threadIdx.y;
  const std::int64_t j = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= g.m || j >= g.n) return;
  T acc = c.data ? static_cast<T>(at(c, i, j)) : T(0);
  for (std::int64_t k = 0; k < g.k; ++k)
    acc = fma(static_cast<T>(at(a, i, k)), static_cast<T>(at(b, k, j)), acc);
  put(d, i, j, double(acc));
}

// A block-scaled instruction chain per element (tensor_core_paths.cpp's
// block_scaled_chain): SFA row i and SFB column j hold the scale values.
template <class T, class S>
__device__ double block_scaled_element(const sim::TcStep& p, const GemmShape& g, const DMat& a, const DMat& b,
                                       std::int64_t i, std::int64_t j, double c, const DMat& sfa,
                                       const DMat& sfb) {
  return sim::tc_detail::block_scaled_chain<64>(p, static_cast<const T*>(a.data) + i * a.rs, a.cs,
                                                static_cast<const T*>(b.data) + j * b.cs, b.rs, int(g.k), c,
                                                static_cast<const S*>(sfa.data) + i * sfa.rs, sfa.cs,
                                                static_cast<const S*>(sfb.data) + j * sfb.cs, sfb.rs);
}

template <class T>
__global__ void block_scaled_kernel(sim::TcStep p, GemmShape g, DMat a, DMat b, DMat c, DMat d, DMat sfa,
                                    DMat sfb) {
  const std::int64_t i = std::int64_t(blockIdx.y) * blockDim.y + threadIdx.y;
  const std::int64_t j = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= g.m || j >= g.n) return;
  const double cv = c.data ? at(c, i, j) : 0.0;
  put(d, i, j,
      sfa.dtype == RPSIM_CUDA_F64 ? block_scaled_element<T, double>(p, g, a, b, i, j, cv, sfa, sfb)
                                  : block_scaled_element<T, float>(p, g, a, b, i, j, cv, sfa, sfb));
}

// torch._scaled_mm scales after a model without an epilogue of its own
// (gemm_scaled.cpp): d = out(f32(f32(sa * sb) * d0) + c), each rounding to
// nearest even, d0 the product from C = 0.
__global__ void scaled_after_kernel(GemmShape g, DMat d, DMat c, TensorScaleView s, FormatDesc out) {
  const std::int64_t i = std::int64_t(blockIdx.y) * blockDim.y + threadIdx.y;
  const std::int64_t j = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= g.m || j >= g.n) return;
  const RoundingDesc nearest;
  const FormatDesc f32 = hd::binary32_desc();
  Flags fl = 0;
  const double scale =
      hd::to_double(f32, hd::round_binary64(f32, scale_a_at(s, i) * scale_b_at(s, j), nearest, fl));
  const double t = hd::to_double(f32, hd::round_binary64(f32, scale * at(d, i, j), nearest, fl));
  const double cv = c.data ? at(c, i, j) : 0.0;
  put(d, i, j, hd::to_double(out, hd::round_binary64(out, t + cv, nearest, fl)));
}

}  // namespace

void launch_sequential(const sim::AccumulatorOps& ops, GemmShape g, DMat a, DMat b, DMat c, DMat d,
                       void* stream) {
  if (a.dtype == RPSIM_CUDA_F64)
    sequential_kernel<double><<<element_grid(g), element_block(), 0, as_stream(stream)>>>(ops, g, a, b, c, d);
  else
    sequential_kernel<float><<<element_grid(g), element_block(), 0, as_stream(stream)>>>(ops, g, a, b, c, d);
  check_launch("sequential_kernel");
}

void launch_native(GemmShape g, DMat a, DMat b, DMat c, DMat d, void* stream) {
  const dim3 grid(unsigned((g.n + kNativeTile - 1) / kNativeTile),
                  unsigned((g.m + kNativeTile - 1) / kNativeTile));
  const dim3 block(kNativeTile, kNativeTile);
  if (a.dtype == RPSIM_CUDA_F64)
    native_kernel<double><<<grid, block, 0, as_stream(stream)>>>(g, a, b, c, d);
  else
    native_kernel<float><<<grid, block, 0, as_stream(stream)>>>(g, a, b, c, d);
  check_launch("native_kernel");
}

void launch_fma_chain(bool binary64, GemmShape g, DMat a, DMat b, DMat c, DMat d, void* stream) {
  if (binary64)
    fma_chain_kernel<double><<<element_grid(g), element_block(), 0, as_stream(stream)>>>(g, a, b, c, d);
  else
    fma_chain_kernel<float><<<element_grid(g), element_block(), 0, as_stream(stream)>>>(g, a, b, c, d);
  check_launch("fma_chain_kernel");
}

void launch_block_scaled(const sim::TcStep& p, GemmShape g, DMat a, DMat b, DMat c, DMat d, DMat sfa,
                         DMat sfb, void* stream) {
  if (a.dtype == RPSIM_CUDA_F64)
    block_scaled_kernel<double>
        <<<element_grid(g), element_block(), 0, as_stream(stream)>>>(p, g, a, b, c, d, sfa, sfb);
  else
    block_scaled_kernel<float>
        <<<element_grid(g), element_block(), 0, as_stream(stream)>>>(p, g, a, b, c, d, sfa, sfb);
  check_launch("block_scaled_kernel");
}

void launch_scaled_after(GemmShape g, DMat d, DMat c, const TensorScaleView& s, const FormatDesc& out,
                         void* stream) {
  scaled_after_kernel<<<element_grid(g), element_block(), 0, as_stream(stream)>>>(g, d, c, s, out);
  check_launch("scaled_after_kernel");
}

}  // namespace rpsim::cuda::backend
