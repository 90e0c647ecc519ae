// RPSIM_HD marks the per-element arithmetic that the CPU core and the CUDA
// backend share (rounding, the Tensor Core block FMA, the block scale rules):
// __host__ __device__ under nvcc, plain inline C++ for the host compiler, so
// one definition serves both devices. Code under it keeps to what a device
// can run: no exceptions, no allocation, no virtual calls, no std:: containers.
#pragma once

#if defined(__CUDACC__)
#define RPSIM_HD __host__ __device__
#define RPSIM_HD_INLINE __host__ __device__ __forceinline__
#else
#define RPSIM_HD
#define RPSIM_HD_INLINE inline
#endif
