// Array rounding, amax and per-tensor FP8 quantisation on the device
// (backend.h): each element is the shared scalar core's (scalar_convert.hpp),
// the kernels add only indexing.
#include "backend_device.cuh"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/scalar_convert.hpp"

namespace rpsim::cuda::backend {
namespace {

__device__ void store(int dtype, void* out, std::size_t i, const FormatDesc& fmt, std::uint64_t bits) {
  switch (dtype) {
    case RPSIM_CUDA_F64: static_cast<std::uint64_t*>(out)[i] = hd::widen_to_binary64(fmt, bits); break;
    case RPSIM_CUDA_F32: static_cast<std::uint32_t*>(out)[i] = hd::widen_to_binary32(fmt, bits); break;
    case RPSIM_CUDA_U8: static_cast<std::uint8_t*>(out)[i] = std::uint8_t(bits); break;
    case RPSIM_CUDA_U16: static_cast<std::uint16_t*>(out)[i] = std::uint16_t(bits); break;
    case RPSIM_CUDA_U32: static_cast<std::uint32_t*>(out)[i] = std::uint32_t(bits); break;
    default: static_cast<std::uint64_t*>(out)[i] = bits; break;
  }
}

__device__ double load(int dtype, const void* in, std::size_t i) {
  return dtype == RPSIM_CUDA_F64 ? static_cast<const double*>(in)[i]
                                 : double(static_cast<const float*>(in)[i]);
}

__global__ void round_kernel(RoundArgs a) {
  const std::size_t step = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += step) {
    RoundingDesc r = a.rnd;
    if (r.mode == RoundingMode::stochastic)
      r.random_bits = counter_random(a.seed, a.stream_id, a.first_index + i);
    Flags flags = 0;
    // binary32 input through the binary32 row (round_to_bits' reference:
    // convert(fmt, binary32, bits(x))), so NaN payloads move as the CPU's do.
    const std::uint64_t bits = a.in_dtype == RPSIM_CUDA_F64
                                   ? hd::round_binary64(a.fmt, static_cast<const double*>(a.in)[i], r, flags)
                                   : hd::round_binary32(a.fmt, static_cast<const float*>(a.in)[i], r, flags);
    store(a.out_dtype, a.out, i, a.fmt, bits);
  }
}

// |x| as an integer that orders as |x| does (its bits), NaN skipped (0):
// fp8_scale's fmax(amax, |x|), whose result does not depend on the order.
// The maximum key is kept in the output's own 8 bytes, which then hold that
// double.
__global__ void amax_kernel(int dtype, const void* in, std::size_t n, unsigned long long* key) {
  __shared__ unsigned long long block_max;
  if (threadIdx.x == 0) block_max = 0;
  __syncthreads();
  unsigned long long m = 0;
  const std::size_t step = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const double x = load(dtype, in, i);
    m = hd::max_of<unsigned long long>(m, hd::is_nan(x) ? 0ull : hd::bits_of(hd::abs_of(x)));
  }
  atomicMax(&block_max, m);
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(key, block_max);
}

__global__ void fp8_quantize_kernel(QuantizeArgs a) {
  const std::size_t step = std::size_t(gridDim.x) * blockDim.x;
  const RoundingDesc nearest;
  const FormatDesc f32 = hd::binary32_desc();
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += step) {
    const double x = load(a.in_dtype, a.in, i);
    // fp8_quantize: binary32(x * scale) to nearest even (a NaN x is x quieted,
    // as x86's mulsd returns its first NaN operand), clamped when finite, then
    // the format to nearest even.
    const double prod = hd::is_nan(x) ? hd::double_of(hd::bits_of(x) | (1ull << 51)) : x * a.scale;
    Flags flags = 0;
    double v = hd::double_of(hd::widen_to_binary64(f32, hd::round_binary64(f32, prod, nearest, flags)));
    if (hd::is_finite(v)) v = v > a.max_finite ? a.max_finite : v < -a.max_finite ? -a.max_finite : v;
    store(a.out_dtype, a.out, i, a.fmt, hd::round_binary64(a.fmt, v, nearest, flags));
  }
}

}  // namespace

void launch_round(const RoundArgs& a, void* stream) {
  round_kernel<<<grid_for(a.n), kThreads, 0, as_stream(stream)>>>(a);
  check_launch("round_kernel");
}

void launch_amax(int dtype, const void* in, std::size_t n, double* out, void* stream) {
  check_cuda(cudaMemsetAsync(out, 0, sizeof *out, as_stream(stream)), "cudaMemsetAsync");
  if (n > 0) {
    amax_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(dtype, in, n,
                                                                 reinterpret_cast<unsigned long long*>(out));
    check_launch("amax_kernel");
  }
}

void launch_fp8_quantize(const QuantizeArgs& a, void* stream) {
  fp8_quantize_kernel<<<grid_for(a.n), kThreads, 0, as_stream(stream)>>>(a);
  check_launch("fp8_quantize_kernel");
}

const char* built_architectures() {
  return RPSIM_CUDA_ARCHITECTURE_LIST;
}

}  // namespace rpsim::cuda::backend
