// Encoding a case's operands (binary32 bit patterns of values exact in the
// input format) into the registers and shared memory of a tensor-core
// instruction, and reading a binary16 result back.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace rpsim::cuda {

__device__ inline float f32(std::uint32_t b) {
  return __uint_as_float(b);
}
__device__ inline std::uint32_t f16_bits(std::uint32_t b) {
  return __half_as_ushort(__float2half_rn(f32(b)));
}
__device__ inline std::uint32_t bf16_bits(std::uint32_t b) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f32(b)));
}
// Exact for every value of the format, so no saturation is asked for.
__device__ inline std::uint32_t fp8_bits(std::uint32_t b, bool e4m3) {
  return __nv_cvt_float_to_fp8(f32(b), __NV_NOSAT, e4m3 ? __NV_E4M3 : __NV_E5M2);
}
__device__ inline std::uint32_t pack2(std::uint32_t lo, std::uint32_t hi) {
  return lo | hi << 16;
}
// The low binary16 of an f16x2 register, widened to binary32 exactly (as tc-golden stores it).
__device__ inline std::uint32_t widen_f16(std::uint32_t h) {
  return __float_as_uint(__half2float(__ushort_as_half(std::uint16_t(h))));
}

}  // namespace rpsim::cuda
