// Device-side helpers of the CUDA backend's kernels: reading and writing the
// plain matrix views of backend_launch.hpp, and launch shapes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend_host.hpp"
#include "backend_launch.hpp"

namespace rpsim::cuda::backend {

__device__ inline double at(const DMat& m, std::int64_t i, std::int64_t j) {
  const std::int64_t o = i * m.rs + j * m.cs;
  return m.dtype == RPSIM_CUDA_F64 ? static_cast<const double*>(m.data)[o]
                                   : double(static_cast<const float*>(m.data)[o]);
}

// v is a value of a format the dtype holds (checked on the host).
__device__ inline void put(const DMat& m, std::int64_t i, std::int64_t j, double v) {
  const std::int64_t o = i * m.rs + j * m.cs;
  if (m.dtype == RPSIM_CUDA_F64)
    static_cast<double*>(m.data)[o] = v;
  else
    static_cast<float*>(m.data)[o] = static_cast<float>(v);
}

__device__ inline double scale_a_at(const TensorScaleView& s, std::int64_t i) {
  return !s.a.data ? 1.0 : at(s.a, s.a_one ? 0 : i, 0);
}
__device__ inline double scale_b_at(const TensorScaleView& s, std::int64_t j) {
  return !s.b.data ? 1.0 : at(s.b, 0, s.b_one ? 0 : j);
}

inline cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}

// A grid-stride launch over n elements.
constexpr unsigned kThreads = 256;
inline unsigned grid_for(std::size_t n) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  const std::size_t cap = 65535u * 8u;
  return unsigned(blocks == 0 ? 1 : blocks < cap ? blocks : cap);
}

// One thread per output element, 16 x 16 blocks.
inline dim3 element_grid(const GemmShape& g) {
  return dim3(unsigned((g.n + 15) / 16), unsigned((g.m + 15) / 16));
}
inline dim3 element_block() {
  return dim3(16, 16);
}

inline void check_launch(const char* what) {
  check_cuda(cudaGetLastError(), what);
}

}  // namespace rpsim::cuda::backend
