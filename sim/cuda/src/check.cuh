#pragma once

#include <cuda_runtime.h>

#include <string>

#include "rpsim/cuda/gpu.hpp"

namespace rpsim::cuda {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(std::string(what) + ": " + cudaGetErrorString(e));
}

// A device buffer holding a copy of host data (or room for results).
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) { check(cudaMalloc(&p_, n * sizeof(T) + 1), "cudaMalloc"); }
  DeviceBuffer(const T* host, std::size_t n) : DeviceBuffer(n) {
    if (host && n) check(cudaMemcpy(p_, host, n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  void to_host(T* host) const {
    check(cudaMemcpy(host, p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

// wgmma.cu: one warpgroup per case on device arrays (K a multiple of the instruction's k).
void launch_wgmma(Mma op, int K, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                  std::uint32_t* d, std::size_t cases);

inline unsigned blocks_for(std::size_t n, unsigned threads) {
  return unsigned((n + threads - 1) / threads);
}

}  // namespace rpsim::cuda
