#include <cuda_runtime.h>

#include "check.cuh"
#include "rpsim/cuda/gpu.hpp"

namespace rpsim::cuda {

DeviceInfo device_info() {
  DeviceInfo info;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    info.why_absent = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    return info;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  info.present = true;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  return info;
}

}  // namespace rpsim::cuda
