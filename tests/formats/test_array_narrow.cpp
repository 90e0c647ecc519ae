// The AVX-512 array paths of issue #30 against the scalar core, bit for bit:
// binary64 input rounded to odd into binary32 and then to the format (every
// mode but SR), stochastic rounding in 32-bit lanes for binary32 input, and
// the intrinsics SR kernel for binary64 input. The inputs sit where those
// paths could go wrong: one binary64 (or binary32) ulp either side of every
// rounding boundary, where the round to odd must keep the sticky bit, and
// binary32 subnormals and tiny values, where the discarded fraction runs past
// 32 bits. On a CPU without AVX-512 the same checks run on the other kernels;
// the AVX2 + F16C binary16 and bfloat16 kernels are checked on every CPU with
// AVX2.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "array_reference.hpp"

using namespace rpsim;
using namespace rpsim::array_test;

namespace {

const char* const narrow_formats[] = {"binary16", "bfloat16", "e4m3", "e5m2", "e3m2", "e2m1", "tf32"};

}  // namespace

TEST_CASE("binary64 and binary32 inputs at every rounding boundary equal the scalar core (round to odd)",
          "[array]") {
  // best: AVX-512's kernels where the CPU has them; avx2: the AVX2 + F16C
  // binary16 and bfloat16 ones (array_narrow_avx2.cpp) on every x86-64 CPU
  // with AVX2.
  for (ArrayIsa isa : {ArrayIsa::best, ArrayIsa::avx2}) {
    for (const char* name : narrow_formats) {
      const Format fmt = parse_format(name);
      const auto in = boundaries(fmt, fmt.bits > 8 ? 11 : 1);
      const auto in_f = boundaries_binary32(in);
      for (RoundingMode mode : all_modes) {
        for (ArrayOptions o : rounding_variants(mode)) {
          o.isa = isa;
          check_against_reference(fmt, in, o);
          check_against_reference(fmt, in_f, o);
        }
      }
    }
  }
}

TEST_CASE("stochastic rounding of tiny and subnormal binary32 inputs equals the scalar core", "[array]") {
  // Log-uniform magnitudes from binary32's smallest subnormal to 2^20: the
  // discarded fraction runs from a few bits to past 64.
  std::mt19937_64 gen(31);
  std::uniform_real_distribution<double> expo(-149.5, 20.0);
  std::vector<float> in(60000);
  for (float& x : in) {
    const float m = float(std::exp2(expo(gen)));
    x = (gen() & 1) ? -m : m;
  }
  for (std::uint32_t b = 1; b < 4096; b += 3) in.push_back(std::bit_cast<float>(b));  // subnormals
  std::vector<double> in_d(in.begin(), in.end());
  for (const char* name : narrow_formats) {
    const Format fmt = parse_format(name);
    for (int k : {1, 7, 16, 24, 31, 32, 33, 48}) {
      ArrayOptions o;
      o.rounding.mode = RoundingMode::stochastic;
      o.rounding.stochastic_bits = k;
      o.seed = 77;
      o.first_index = (std::uint64_t(1) << 32) - 5000;  // counters across 2^32
      check_against_reference(fmt, in, o);
      check_against_reference(fmt, in_d, o);
    }
  }
}
