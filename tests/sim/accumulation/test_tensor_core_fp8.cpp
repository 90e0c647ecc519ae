// Hopper's and Blackwell's FP8 mma.sync: the two interleaved steps from zero
// and how C joins, pinned by constructed cases (the mechanism measured on
// tc-stress/H100 and the public B200 vectors; see tensor_core_presets.cpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "rpsim/formats/format.hpp"

namespace {

using namespace rpsim;
using namespace rpsim::sim;

const Format& fp16 = formats::binary16();
const Format& fp32 = formats::binary32();

double dot(const TensorCoreModel& m, std::vector<double> a, std::vector<double> b, double c) {
  return tensor_core_dot(m, a, b, c);
}

}  // namespace

TEST_CASE("tensor core: Hopper mma.sync FP8 -> fp16 is two interleaved steps from zero, C added last",
          "[tc]") {
  // A cancelling pair 2^8*2^8 - 2^8*2^8 at k = 0, 1 and a small product
  // t = 2^-5*2^-5 = 2^-10 at k = pos. In the pair's step t lies below the
  // alignment grid (2^(16-25), or 2^(16-13) on the FP8 path) and is cut; in a
  // later step it is added alone to the pair's exact 0. D == t therefore marks
  // the positions of the later step: the step_interleave pattern.
  const double t = std::ldexp(1, -10);
  auto pattern = [&](const TensorCoreModel& m, std::size_t k, std::size_t first) {
    std::vector<std::size_t> later;
    for (std::size_t pos = first + 2; pos < first + 32; ++pos) {
      std::vector<double> a(k, 0.0), b(k, 0.0);
      a[first] = b[first] = b[first + 1] = 256;
      a[first + 1] = -256;
      a[pos] = b[pos] = std::ldexp(1, -5);
      if (dot(m, a, b, 0) == t) later.push_back(pos - first);
    }
    return later;
  };
  const std::vector<std::size_t> pairs_2_3{2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31};
  for (const Format* in : {&formats::e4m3(), &formats::e5m2()}) {
    const auto m = tensor_core_preset("h100", *in, fp16);
    INFO(m.name);
    CHECK(m.terms_per_step == 16);
    CHECK(m.terms_per_instruction == 32);
    CHECK(m.fraction_bits == 25);
    CHECK(pattern(m, 32, 0) == pairs_2_3);
    // K = 64: the second instruction repeats it (and the first one's exact 0
    // is its C).
    CHECK(pattern(m, 64, 32) == pairs_2_3);
    // Contiguous halves would put the later step at 16..31.
    auto contiguous = m;
    contiguous.step_interleave = 0;
    std::vector<std::size_t> upper(16);
    for (std::size_t i = 0; i < 16; ++i) upper[i] = 16 + i;
    CHECK(pattern(contiguous, 32, 0) == upper);
    // C joins after the products: C = t next to the pair survives; aligned with
    // the pair in the first step it would be cut.
    std::vector<double> a(32, 0.0), b(32, 0.0);
    a[0] = b[0] = b[1] = 256;
    a[1] = -256;
    CHECK(dot(m, a, b, t) == t);
    auto c_first = m;
    c_first.c_join = CJoin::aligned_with_products;
    CHECK(dot(c_first, a, b, t) == 0.0);
    // The steps' exact zero is +0 (no -0 in the fixed-point sum), so
    // +0 + -0 = +0 through the C join; cancellation gives +0.
    std::vector<double> z(32, 0.0), nz(32, -0.0);
    CHECK(!std::signbit(dot(m, z, nz, -0.0)));
    CHECK(!std::signbit(dot(m, z, z, -0.0)));
    CHECK(!std::signbit(dot(m, a, b, -0.0)));
    // The FP8 datapath (wgmma): one 32-product step, t and C cut wherever
    // they are.
    for (const auto& fp8 :
         {tensor_core_preset("h100", *in, fp16, "wgmma"), tensor_core_preset("h100", *in, fp32, "wgmma")}) {
      INFO(fp8.name);
      CHECK(fp8.step_interleave == 0);
      CHECK(pattern(fp8, 32, 0).empty());
      CHECK(dot(fp8, a, b, t) == 0.0);
    }
  }
  // The parameters are checked.
  auto bad = tensor_core_preset("h100", formats::e4m3(), fp16);
  bad.step_interleave = 3;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("step_interleave"));
  bad.step_interleave = 2;
  bad.terms_per_instruction = 24;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("terms_per_instruction"));
}

TEST_CASE("tensor core: Hopper mma.sync FP8 -> fp32 is the fp16 path's two steps, C added by an IEEE add",
          "[tc]") {
  // Measured on an H100 (tc-stress): C = 1 plus one product 2^-20 gives
  // 1 + 2^-20 (1.000001); the 13-bit wgmma FP8 datapath gives 1.
  const auto& e5m2 = formats::e5m2();
  const auto m = tensor_core_preset("h100", e5m2, fp32);
  CHECK(m.name == "h100 e5m2->binary32");
  CHECK(tensor_core_preset("h100", e5m2, fp32, "mma.sync").terms_per_step == 16);
  CHECK(m.terms_per_step == 16);
  CHECK(m.terms_per_instruction == 32);
  CHECK(m.step_interleave == 2);
  CHECK(m.fraction_bits == 25);
  CHECK(m.final_rounding == RoundingMode::toward_zero);
  CHECK(m.c_join == CJoin::after_products);
  const auto wgmma = tensor_core_preset("h100", e5m2, fp32, "wgmma");
  std::vector<double> a(32, 0.0), b(32, 0.0);
  a[5] = b[5] = std::ldexp(1, -10);
  CHECK(dot(m, a, b, 1.0) == 1 + std::ldexp(1, -20));
  CHECK(dot(wgmma, a, b, 1.0) == 1.0);
  // The steps truncate to binary32 (the fp16 -> fp32 path): products 1 and
  // 1.5*2^-24 give 1, not 1 + 2^-23.
  a.assign(32, 0.0);
  b.assign(32, 0.0);
  a[0] = b[0] = 1;
  a[1] = 1.5 * std::ldexp(1, -12);
  b[1] = std::ldexp(1, -12);
  CHECK(dot(m, a, b, 0.0) == 1.0);
  // C joins last through an exact sum rounded to nearest even: the steps give
  // x = 2^-24 + 2^-30 exactly, and 1 + x rounds up to 1 + 2^-23. Truncating
  // toward zero would give 1, and so would aligning x with C to 25 bits (the
  // 2^-30 cut, leaving a tie that rounds to even).
  a[0] = b[0] = 0;
  a[1] = b[1] = std::ldexp(1, -12);
  a[4] = b[4] = std::ldexp(1, -15);  // an e5m2 subnormal
  CHECK(dot(m, a, b, 0.0) == std::ldexp(1, -24) + std::ldexp(1, -30));
  CHECK(dot(m, a, b, 1.0) == 1 + std::ldexp(1, -23));
  // -(1 - 2^-24 - 2^-30) rounds to nearest, -(1 - 2^-24); toward zero it
  // would be -(1 - 2^-23).
  CHECK(dot(m, a, b, -1.0) == -1 + std::ldexp(1, -24));
  // The two steps take k = 0,1, 4,5, ... and 2,3, 6,7, ...; a product cut in
  // the first step (next to 2^8*2^8 - 2^8*2^8) survives in the second.
  a.assign(32, 0.0);
  b.assign(32, 0.0);
  a[0] = b[0] = b[1] = 256;
  a[1] = -256;
  a[2] = b[2] = std::ldexp(1, -10);
  CHECK(dot(m, a, b, 0.0) == std::ldexp(1, -20));
  a[2] = b[2] = 0;
  a[4] = b[4] = std::ldexp(1, -10);
  CHECK(dot(m, a, b, 0.0) == 0.0);
  // Signs through the C add: the steps' exact zero is +0 (MMA-Sim's rule,
  // zero_sum_result), so +0 + -0 is +0; x - x is +0.
  std::vector<double> z(32, 0.0), nz(32, -0.0);
  CHECK(!std::signbit(dot(m, z, nz, -0.0)));
  CHECK(!std::signbit(dot(m, z, z, -0.0)));
  a.assign(32, 0.0);
  b.assign(32, 0.0);
  a[0] = b[0] = 1;
  CHECK(!std::signbit(dot(m, a, b, -1.0)));
}

TEST_CASE("tensor core: Blackwell mma.sync FP8 is two interleaved steps, C added last by an IEEE add",
          "[tc]") {
  // The case patterns a B200 run should try to confirm what the golden B200
  // vectors leave open (tensor_core_presets.cpp, b200); here they pin
  // what the preset does.
  const double t = std::ldexp(1, -10);
  for (const Format* in : {&formats::e4m3(), &formats::e5m2()}) {
    for (const Format* out : {&fp16, &fp32}) {
      const auto m = tensor_core_preset("b200", *in, *out);
      INFO(m.name);
      CHECK(m.terms_per_step == 16);
      CHECK(m.terms_per_instruction == 32);
      CHECK(m.step_interleave == 2);
      CHECK(m.fraction_bits == 25);
      CHECK(m.c_join == CJoin::after_products);
      // Which products share a step: a cancelling pair 2^8*2^8 - 2^8*2^8 at
      // k = 0, 1 cuts t = 2^-5*2^-5 in its own step (grid 2^(16-25)); in the
      // other step t is added to the pair's exact 0. D == t marks k = 2,3, 6,7, ...
      std::vector<std::size_t> later;
      for (std::size_t pos = 2; pos < 32; ++pos) {
        std::vector<double> a(32, 0.0), b(32, 0.0);
        a[0] = b[0] = b[1] = 256;
        a[1] = -256;
        a[pos] = b[pos] = std::ldexp(1, -5);
        if (dot(m, a, b, 0) == t) later.push_back(pos);
      }
      CHECK(later == std::vector<std::size_t>{2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31});
    }
    // fp32: the steps truncate. Products 2^8 + 2^-16 + 2^-17 (k = 0, 1, 4:
    // one step) are 0.75 ulp above 2^8; C = 0.
    const auto m = tensor_core_preset("b200", *in, fp32);
    std::vector<double> a(32, 0.0), b(32, 0.0);
    a[0] = b[0] = 16;
    a[1] = b[1] = a[4] = std::ldexp(1, -8);
    b[4] = std::ldexp(1, -9);
    CHECK(dot(m, a, b, 0) == 256);
    // ... but C is added by a round-to-nearest-even addition, correctly rounded:
    // 1 + C with C = 2^-24 (1 + 2^-23) is just above the tie, so 1 + 2^-23.
    // A two-term step cut to 25 bits would see the tie (and truncate anyway:
    // 1, the value the former after_products gave).
    std::fill(a.begin(), a.end(), 0.0);
    std::fill(b.begin(), b.end(), 0.0);
    a[0] = b[0] = 1;
    const double c = std::ldexp(1 + std::ldexp(1, -23), -24);
    CHECK(dot(m, a, b, c) == 1 + std::ldexp(1, -23));
    CHECK(dot(m, a, b, std::ldexp(1, -24)) == 1);  // the tie goes to even
    CHECK(dot(m, a, b, std::ldexp(3, -24)) == 1 + std::ldexp(1, -22));
    // Signs of zero through the IEEE add: the steps' exact zero is +0
    // (zero_sum_result), so even -0 products with C = -0 give +0.
    std::vector<double> z(32, 0.0), nz(32, -0.0);
    CHECK(!std::signbit(dot(m, z, nz, -0.0)));
    CHECK(!std::signbit(dot(m, z, z, -0.0)));
    CHECK(dot(m, a, b, -1.0) == 0.0);
    CHECK(!std::signbit(dot(m, a, b, -1.0)));
  }
}
