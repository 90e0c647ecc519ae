// Host interface to rpsim's reference CUDA kernels. Plain C++: callers never
// see CUDA types, so the rest of rpsim builds without a CUDA compiler (then
// RPSIM_HAVE_CUDA is undefined and these functions do not exist).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace rpsim::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DeviceInfo {
  bool present = false;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int driver_version = 0;    // cudaDriverGetVersion, e.g. 13000
  int runtime_version = 0;   // cudaRuntimeGetVersion
  std::string why_absent;    // when !present
};
DeviceInfo device_info();

// Conversion intrinsics, one kernel each. Inputs and outputs are bit patterns
// widened to 32 bits.
enum class Conversion {
  f32_to_f16_rn,
  f32_to_f16_rz,
  f32_to_f16_rd,
  f32_to_f16_ru,  // __float2half_*
  f32_to_bf16_rn,
  f32_to_bf16_rz,
  f32_to_bf16_rd,
  f32_to_bf16_ru,  // __float2bfloat16_*
  f32_to_e4m3_sat,
  f32_to_e4m3_nosat,
  f32_to_e5m2_sat,
  f32_to_e5m2_nosat,  // __nv_cvt_float_to_fp8
  f16_to_f32,
  bf16_to_f32,  // __half2float, __bfloat162float
  e4m3_to_f16,
  e5m2_to_f16,  // __nv_cvt_fp8_to_halfraw
};
struct ConversionInfo {
  Conversion op;
  const char* name;  // the intrinsic, e.g. "__float2half_rz"
  const char* from;  // rpsim format names
  const char* to;
  const char* rounding;  // rne rtz rd ru
  bool saturate;         // FP8 __NV_SATFINITE
  // The one NaN returned for every NaN input (sim::ConversionSpec::nan_result); -1: none.
  int nan_result;
};
const std::vector<ConversionInfo>& conversions();
void convert(Conversion op, const std::uint32_t* in, std::uint32_t* out, std::size_t n);
// The same for the inputs first, first + 1, ..., first + n - 1 (bit patterns
// made on the device, so that an exhaustive check moves only the results).
void convert_range(Conversion op, std::uint32_t first, std::uint32_t* out, std::size_t n);

// Half and bfloat16 arithmetic intrinsics (all round to nearest even).
enum class Arithmetic { hadd_f16, hsub_f16, hmul_f16, hfma_f16, hadd_bf16, hsub_bf16, hmul_bf16, hfma_bf16 };
struct ArithmeticInfo {
  Arithmetic op;
  const char* name;
  const char* format;
  int operands;
};
const std::vector<ArithmeticInfo>& arithmetics();
void arithmetic(Arithmetic op, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                std::uint32_t* out, std::size_t n);

// One tensor-core instruction per case (a chain of them when K is a multiple
// of the instruction's k), C[0][0] holding the case's c and D[0][0] read
// back: for mma.sync (one warp) row 0 of A holds the case's a and column 0 of
// B its b; for wgmma (one warpgroup, A in registers, B in shared memory)
// every row of A is a and every column of B is b, so that only the K order of
// the fragments matters. Layout of a/b/c/d as in ../shared/tc-golden: binary32
// bit patterns, fp16 results widened exactly.
enum class Mma {
  m16n8k16_f16_f32,
  m16n8k16_f16_f16,
  m16n8k16_bf16_f32,
  m16n8k8_tf32_f32,
  m16n8k32_e4m3_f32,
  m16n8k32_e5m2_f32,
  // f16 accumulator: on Hopper not the FP8 datapath (tensor_core.hpp,
  // step_interleave), so it is validated on its own.
  m16n8k32_e4m3_f16,
  m16n8k32_e5m2_f16,
  // Hopper's warpgroup instructions (sm_90a): the FP8 ones are the 13-bit
  // FP8 datapath of tc-golden/H100's binary32 sets, unlike mma.sync's.
  wgmma_m64n8k16_f16_f32,
  wgmma_m64n8k16_f16_f16,
  wgmma_m64n8k16_bf16_f32,
  wgmma_m64n8k32_e4m3_f32,
  wgmma_m64n8k32_e5m2_f32,
  wgmma_m64n8k32_e4m3_f16,
  wgmma_m64n8k32_e5m2_f16,
};
struct MmaInfo {
  Mma op;
  const char* name;         // PTX instruction shape and types
  const char* instruction;  // "mma.sync" or "wgmma" (the preset's instruction)
  const char* input;        // rpsim format names
  const char* output;
  int k;       // K of one instruction
  int min_sm;  // compute capability x 10
  int max_sm;  // 0: any newer one; 90 for sm_90a code, which runs on 9.0 only
};
const std::vector<MmaInfo>& mmas();
void mma(Mma op, int K, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
         std::uint32_t* d, std::size_t cases);

// Tiled GEMM on mma.sync m16n8k16 (fp16 in, fp32 accumulate): D = A*B + C,
// A MxK row-major, B KxN column-major, C/D MxN row-major, M%16 == 0, N%8 == 0,
// K%16 == 0. K order: for each output tile, k-blocks of 16 in increasing
// order, each one mma.sync whose C is the previous D — so the emulator
// reproduces it with a tensor-core chain of 16-term steps.
void gemm_f16_f32(int M, int N, int K, const std::uint16_t* A, const std::uint16_t* B, const float* C,
                  float* D);

}  // namespace rpsim::cuda
