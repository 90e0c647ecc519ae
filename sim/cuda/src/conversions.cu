// One kernel per conversion intrinsic, so that what runs is exactly the
// intrinsic a user's kernel would call.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "check.cuh"

namespace rpsim::cuda {
namespace {

__device__ float as_float(std::uint32_t b) {
  return __uint_as_float(b);
}

__device__ std::uint32_t convert_one(Conversion op, std::uint32_t x) {
  std::uint32_t r = 0;
  switch (op) {
    case Conversion::f32_to_f16_rn: r = __half_as_ushort(__float2half_rn(as_float(x))); break;
    case Conversion::f32_to_f16_rz: r = __half_as_ushort(__float2half_rz(as_float(x))); break;
    case Conversion::f32_to_f16_rd: r = __half_as_ushort(__float2half_rd(as_float(x))); break;
    case Conversion::f32_to_f16_ru: r = __half_as_ushort(__float2half_ru(as_float(x))); break;
    case Conversion::f32_to_bf16_rn: r = __bfloat16_as_ushort(__float2bfloat16_rn(as_float(x))); break;
    case Conversion::f32_to_bf16_rz: r = __bfloat16_as_ushort(__float2bfloat16_rz(as_float(x))); break;
    case Conversion::f32_to_bf16_rd: r = __bfloat16_as_ushort(__float2bfloat16_rd(as_float(x))); break;
    case Conversion::f32_to_bf16_ru: r = __bfloat16_as_ushort(__float2bfloat16_ru(as_float(x))); break;
    case Conversion::f32_to_e4m3_sat:
      r = __nv_cvt_float_to_fp8(as_float(x), __NV_SATFINITE, __NV_E4M3);
      break;
    case Conversion::f32_to_e4m3_nosat: r = __nv_cvt_float_to_fp8(as_float(x), __NV_NOSAT, __NV_E4M3); break;
    case Conversion::f32_to_e5m2_sat:
      r = __nv_cvt_float_to_fp8(as_float(x), __NV_SATFINITE, __NV_E5M2);
      break;
    case Conversion::f32_to_e5m2_nosat: r = __nv_cvt_float_to_fp8(as_float(x), __NV_NOSAT, __NV_E5M2); break;
    case Conversion::f16_to_f32: r = __float_as_uint(__half2float(__ushort_as_half(std::uint16_t(x)))); break;
    case Conversion::bf16_to_f32:
      r = __float_as_uint(__bfloat162float(__ushort_as_bfloat16(std::uint16_t(x))));
      break;
    case Conversion::e4m3_to_f16: {
      const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(x), __NV_E4M3);
      r = h.x;
      break;
    }
    case Conversion::e5m2_to_f16: {
      const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(x), __NV_E5M2);
      r = h.x;
      break;
    }
  }
  return r;
}

// `in` null: the inputs are first, first + 1, ...
__global__ void convert_kernel(Conversion op, const std::uint32_t* in, std::uint32_t first,
                               std::uint32_t* out, std::size_t n) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = convert_one(op, in ? in[i] : std::uint32_t(first + i));
}

__global__ void arithmetic_kernel(Arithmetic op, const std::uint32_t* a, const std::uint32_t* b,
                                  const std::uint32_t* c, std::uint32_t* out, std::size_t n) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const __half ha = __ushort_as_half(std::uint16_t(a[i])), hb = __ushort_as_half(std::uint16_t(b[i]));
  const __nv_bfloat16 ba = __ushort_as_bfloat16(std::uint16_t(a[i])),
                      bb = __ushort_as_bfloat16(std::uint16_t(b[i]));
  std::uint32_t r = 0;
  switch (op) {
    case Arithmetic::hadd_f16: r = __half_as_ushort(__hadd(ha, hb)); break;
    case Arithmetic::hsub_f16: r = __half_as_ushort(__hsub(ha, hb)); break;
    case Arithmetic::hmul_f16: r = __half_as_ushort(__hmul(ha, hb)); break;
    case Arithmetic::hfma_f16:
      r = __half_as_ushort(__hfma(ha, hb, __ushort_as_half(std::uint16_t(c[i]))));
      break;
    case Arithmetic::hadd_bf16: r = __bfloat16_as_ushort(__hadd(ba, bb)); break;
    case Arithmetic::hsub_bf16: r = __bfloat16_as_ushort(__hsub(ba, bb)); break;
    case Arithmetic::hmul_bf16: r = __bfloat16_as_ushort(__hmul(ba, bb)); break;
    case Arithmetic::hfma_bf16:
      r = __bfloat16_as_ushort(__hfma(ba, bb, __ushort_as_bfloat16(std::uint16_t(c[i]))));
      break;
  }
  out[i] = r;
}

}  // namespace

const std::vector<ConversionInfo>& conversions() {
  static const std::vector<ConversionInfo> table = {
      {Conversion::f32_to_f16_rn, "__float2half_rn", "binary32", "binary16", "rne", false, -1},
      {Conversion::f32_to_f16_rz, "__float2half_rz", "binary32", "binary16", "rtz", false, -1},
      {Conversion::f32_to_f16_rd, "__float2half_rd", "binary32", "binary16", "rd", false, -1},
      {Conversion::f32_to_f16_ru, "__float2half_ru", "binary32", "binary16", "ru", false, -1},
      {Conversion::f32_to_bf16_rn, "__float2bfloat16_rn", "binary32", "bfloat16", "rne", false, -1},
      {Conversion::f32_to_bf16_rz, "__float2bfloat16_rz", "binary32", "bfloat16", "rtz", false, -1},
      {Conversion::f32_to_bf16_rd, "__float2bfloat16_rd", "binary32", "bfloat16", "rd", false, -1},
      {Conversion::f32_to_bf16_ru, "__float2bfloat16_ru", "binary32", "bfloat16", "ru", false, -1},
      {Conversion::f32_to_e4m3_sat, "__nv_cvt_float_to_fp8(E4M3,SATFINITE)", "binary32", "e4m3", "rne", true,
       -1},
      {Conversion::f32_to_e4m3_nosat, "__nv_cvt_float_to_fp8(E4M3,NOSAT)", "binary32", "e4m3", "rne", false,
       -1},
      {Conversion::f32_to_e5m2_sat, "__nv_cvt_float_to_fp8(E5M2,SATFINITE)", "binary32", "e5m2", "rne", true,
       -1},
      {Conversion::f32_to_e5m2_nosat, "__nv_cvt_float_to_fp8(E5M2,NOSAT)", "binary32", "e5m2", "rne", false,
       -1},
      {Conversion::f16_to_f32, "__half2float", "binary16", "binary32", "rne", false, -1},
      {Conversion::bf16_to_f32, "__bfloat162float", "bfloat16", "binary32", "rne", false, -1},
      {Conversion::e4m3_to_f16, "__nv_cvt_fp8_to_halfraw(E4M3)", "e4m3", "binary16", "rne", false, 0x7FFF},
      {Conversion::e5m2_to_f16, "__nv_cvt_fp8_to_halfraw(E5M2)", "e5m2", "binary16", "rne", false, 0x7FFF},
  };
  return table;
}

const std::vector<ArithmeticInfo>& arithmetics() {
  static const std::vector<ArithmeticInfo> table = {
      {Arithmetic::hadd_f16, "__hadd(half)", "binary16", 2},
      {Arithmetic::hsub_f16, "__hsub(half)", "binary16", 2},
      {Arithmetic::hmul_f16, "__hmul(half)", "binary16", 2},
      {Arithmetic::hfma_f16, "__hfma(half)", "binary16", 3},
      {Arithmetic::hadd_bf16, "__hadd(bf16)", "bfloat16", 2},
      {Arithmetic::hsub_bf16, "__hsub(bf16)", "bfloat16", 2},
      {Arithmetic::hmul_bf16, "__hmul(bf16)", "bfloat16", 2},
      {Arithmetic::hfma_bf16, "__hfma(bf16)", "bfloat16", 3},
  };
  return table;
}

void convert(Conversion op, const std::uint32_t* in, std::uint32_t* out, std::size_t n) {
  DeviceBuffer<std::uint32_t> din(in, n), dout(n);
  convert_kernel<<<blocks_for(n, 256), 256>>>(op, din.get(), 0, dout.get(), n);
  check(cudaGetLastError(), "convert kernel launch");
  check(cudaDeviceSynchronize(), "convert kernel");
  dout.to_host(out);
}

void convert_range(Conversion op, std::uint32_t first, std::uint32_t* out, std::size_t n) {
  if (n > (std::uint64_t(1) << 32) - first) throw CudaError("convert_range: the range passes 2^32");
  DeviceBuffer<std::uint32_t> dout(n);
  convert_kernel<<<blocks_for(n, 256), 256>>>(op, nullptr, first, dout.get(), n);
  check(cudaGetLastError(), "convert kernel launch");
  check(cudaDeviceSynchronize(), "convert kernel");
  dout.to_host(out);
}

void arithmetic(Arithmetic op, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                std::uint32_t* out, std::size_t n) {
  DeviceBuffer<std::uint32_t> da(a, n), db(b, n), dc(c, c ? n : 0), dout(n);
  arithmetic_kernel<<<blocks_for(n, 256), 256>>>(op, da.get(), db.get(), c ? dc.get() : da.get(), dout.get(),
                                                 n);
  check(cudaGetLastError(), "arithmetic kernel launch");
  check(cudaDeviceSynchronize(), "arithmetic kernel");
  dout.to_host(out);
}

}  // namespace rpsim::cuda
