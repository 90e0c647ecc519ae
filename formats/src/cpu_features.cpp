// The CPU's extensions, read once (cpu_features.hpp).
#include "rpsim/formats/cpu_features.hpp"

namespace rpsim {
namespace {

CpuFeatures read_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.bmi2 = __builtin_cpu_supports("bmi2");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#if defined(__clang__)
  // clang 14's __builtin_cpu_supports has no "f16c"; every AVX2 processor
  // has F16C (Ivy Bridge and Piledriver came first).
  f.f16c = f.avx2 || f.avx512f;
#else
  f.f16c = __builtin_cpu_supports("f16c");
#endif
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = read_cpu_features();
  return features;
}

}  // namespace rpsim
