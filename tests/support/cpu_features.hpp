// Whether this CPU has F16C, for the tests that use the x86 conversion
// instructions as an independent oracle. Read from CPUID (leaf 1, ECX bit 29)
// because clang 14's __builtin_cpu_supports has no "f16c" (the sanitizer
// build uses clang); "avx" there also checks that the OS saves the YMM state
// the VEX-encoded conversions need.
#pragma once

#include <cpuid.h>

namespace rpsim::test {

inline bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}

}  // namespace rpsim::test
