// The x86 instruction-set extensions rpsim's vector paths dispatch on, read
// once from cpuid (GCC's __builtin_cpu_supports) and shared by every caller:
// the array kernels (formats), the native GEMM's tiles, packing and register
// transposes (accumulation), and the training ops' masks, sums and block
// quantisers (train). A kernel built with __attribute__((target(...))) runs
// only where every extension its target names is here.
#pragma once

namespace rpsim {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool bmi2 = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  bool avx512bf16 = false;
  bool f16c = false;
};

// This CPU's features (all false off x86-64 or off GCC/clang). Read at the
// first call, not by a namespace-scope initialiser: one may run before the
// CPU model __builtin_cpu_supports reads is filled in.
const CpuFeatures& cpu_features();

}  // namespace rpsim
