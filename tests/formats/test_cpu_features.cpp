// cpu_features() against the cpuid instruction read directly (Intel SDM
// vol. 2A, CPUID: leaf 1 ECX, leaf 7 sub-leaf 0 EBX, sub-leaf 1 EAX) and the
// OS's saved-state mask (XGETBV XCR0): a field wired to the wrong extension
// would send a vector path to a CPU without it.
#include <catch2/catch.hpp>
#include <cstdint>

#include "rpsim/formats/cpu_features.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

using namespace rpsim;

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

struct Leaves {
  unsigned l1_ecx = 0, l7_ebx = 0, l71_eax = 0;
  std::uint64_t xcr0 = 0;
};

Leaves read_leaves() {
  Leaves r;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) r.l1_ecx = c;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) r.l7_ebx = b;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) r.l71_eax = a;
  if (r.l1_ecx & (1u << 27)) {  // OSXSAVE: XGETBV may be executed
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    r.xcr0 = (std::uint64_t(hi) << 32) | lo;
  }
  return r;
}

bool bit(unsigned word, int n) {
  return (word >> n) & 1u;
}

}  // namespace

TEST_CASE("cpu_features reads each extension's own cpuid bit, with the OS's register state") {
  const Leaves l = read_leaves();
  const bool ymm = (l.xcr0 & 0x6) == 0x6;           // SSE and AVX state
  const bool zmm = ymm && (l.xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const CpuFeatures& f = cpu_features();
  CHECK(f.avx2 == (ymm && bit(l.l7_ebx, 5)));
  CHECK(f.bmi2 == bit(l.l7_ebx, 8));
  CHECK(f.fma == (ymm && bit(l.l1_ecx, 12)));
  CHECK(f.avx512f == (zmm && bit(l.l7_ebx, 16)));
  CHECK(f.avx512dq == (zmm && bit(l.l7_ebx, 17)));
  CHECK(f.avx512bw == (zmm && bit(l.l7_ebx, 30)));
  CHECK(f.avx512vl == (zmm && bit(l.l7_ebx, 31)));
  CHECK(f.avx512bf16 == (zmm && bit(l.l71_eax, 5)));
#if !defined(__clang__)
  CHECK(f.f16c == (ymm && bit(l.l1_ecx, 29)));
#endif
  // Read once: every caller shares the same row.
  CHECK(&cpu_features() == &f);
}
#else
TEST_CASE("cpu_features off x86-64 reports no extension") {
  const CpuFeatures& f = cpu_features();
  CHECK_FALSE(f.avx2);
  CHECK_FALSE(f.avx512f);
}
#endif
