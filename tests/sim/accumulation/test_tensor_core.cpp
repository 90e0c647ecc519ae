// The detection patterns of Fasi et al. (2021) and Khattak & Mikaitis (2025),
// run on every preset: extra alignment bits, final rounding, terms per step,
// the 13-bit FP8 accumulator; and the GEMM kernel against the per-element model.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
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

// Extra alignment bits: D = 1*1 + C with C = -(1 - 2^-24). C's last bit lies
// 24 bits below the product's exponent: kept with >= 1 extra bit, truncated
// (|C| rounded down to 1 - 2^-23) without.
double extra_bit_probe(const TensorCoreModel& m) {
  std::vector<double> a(static_cast<std::size_t>(m.terms_per_step), 0.0), b = a;
  a[0] = b[0] = 1;
  return dot(m, a, b, -(1 - std::ldexp(1, -24)));
}

}  // namespace

TEST_CASE("tensor core: extra alignment bits, V100 0, Ampere/Ada 1, Hopper/Blackwell 2", "[tc]") {
  CHECK(extra_bit_probe(tensor_core_preset("v100", fp16, fp32)) == std::ldexp(1, -23));
  for (const char* gpu : {"t4", "a100", "a2", "a30", "ada", "l40s", "h100", "h200", "b200"})
    CHECK(extra_bit_probe(tensor_core_preset(gpu, fp16, fp32)) == std::ldexp(1, -24));
  // The second extra bit: 1*1 + C with C = -(0.5 - 2^-25), binary32 with its
  // last bit at 2^-25. 23 bits below 2^0 truncate |C| to 0.5 - 2^-23, 24 bits to
  // 0.5 - 2^-24 (the sum 0.5 + 2^-24 is binary32), 25 keep it exact, and the
  // sum 0.5 + 2^-25 truncates to 0.5.
  const double c = -(0.5 - std::ldexp(1, -25));
  REQUIRE(static_cast<double>(static_cast<float>(c)) == c);
  auto probe = [&](const char* gpu) {
    const auto m = tensor_core_preset(gpu, fp16, fp32);
    std::vector<double> a(static_cast<std::size_t>(m.terms_per_step), 0.0), b = a;
    a[0] = b[0] = 1;
    return dot(m, a, b, c);
  };
  CHECK(probe("v100") == 0.5 + std::ldexp(1, -23));
  CHECK(probe("a100") == 0.5 + std::ldexp(1, -24));
  CHECK(probe("ada") == 0.5 + std::ldexp(1, -24));
  CHECK(probe("h100") == 0.5);
  CHECK(probe("b200") == 0.5);
}

TEST_CASE("tensor core: the final normalisation truncates for fp32 output, rounds to nearest for fp16",
          "[tc]") {
  for (const auto& gpu : tensor_core_preset_names()) {
    if (tensor_core_instruction_names(gpu).find("mma.sync") == std::string::npos) continue;  // AMD: mfma
    auto m = tensor_core_preset(gpu, fp16, fp32);
    std::vector<double> a(static_cast<std::size_t>(m.terms_per_step), 0.0), b = a;
    // 1 + 1.5*2^-24: representable on every alignment grid (2^-23 on V100 keeps
    // none of it; RTZ gives 1 either way), rounds up to 1 + 2^-23 under RNE.
    a[0] = b[0] = 1;
    a[1] = 1.5 * std::ldexp(1, -12);
    b[1] = std::ldexp(1, -12);
    INFO(gpu);
    CHECK(dot(m, a, b, 0) == 1.0);
    a[0] = -1;
    a[1] = -a[1];
    CHECK(dot(m, a, b, 0) == -1.0);  // toward zero, not down
    // A sum of 1 + 2^-23 + 2^-24 + ... with bits inside the grid: 3 ulps at 2^-25
    // exact on H100; fp16 output rounds 1 + 0.75*2^-10 up to 1 + 2^-10.
    auto h = tensor_core_preset(gpu, fp16, fp16);
    std::vector<double> ha(static_cast<std::size_t>(h.terms_per_step), 0.0), hb = ha;
    ha[0] = hb[0] = 1;
    ha[1] = 0.75;
    hb[1] = std::ldexp(1, -10);
    CHECK(dot(h, ha, hb, 0) == 1 + std::ldexp(1, -10));
    ha[1] = 0.25;
    CHECK(dot(h, ha, hb, 0) == 1.0);
  }
}

TEST_CASE("tensor core: terms per step found by moving a small term across the step boundary", "[tc]") {
  // 1 - 1 + t: inside the step of the cancelling pair, t (2^-30) lies below the
  // alignment grid and is cut; in the next step it is added alone, exactly.
  struct Case {
    const char* gpu;
    const Format* in;
    int terms;
    const char* instruction = "";
  };
  const Case cases[] = {{"v100", &fp16, 4},
                        {"a100", &fp16, 8},
                        {"a100", &formats::bfloat16(), 8},
                        {"a100", &formats::tf32(), 4},
                        {"ada", &fp16, 8},
                        {"h100", &fp16, 16},
                        {"h100", &formats::bfloat16(), 16},
                        {"h100", &formats::tf32(), 8},
                        {"b200", &fp16, 16},
                        {"ada", &formats::e4m3(), 16},
                        {"h100", &formats::e4m3(), 32, "wgmma"}};
  for (const auto& cs : cases) {
    const auto m = tensor_core_preset(cs.gpu, *cs.in, fp32, cs.instruction);
    INFO(m.name);
    CHECK(m.terms_per_step == cs.terms);
    const std::size_t k = 2 * static_cast<std::size_t>(cs.terms);
    // t = 2^-5 * 2^-5 = 2^-10 for FP8 (its grid below 1 is 2^-13 at F = 13: use
    // 2^-9 * 2^-9 = 2^-18, representable in e4m3 as subnormals 2^-9).
    const bool fp8 = cs.in->man_bits == 3;
    const double t_half = fp8 ? std::ldexp(1, -9) : std::ldexp(1, -15);
    for (std::size_t pos : {static_cast<std::size_t>(cs.terms) - 1, static_cast<std::size_t>(cs.terms)}) {
      std::vector<double> a(k, 0.0), b(k, 0.0);
      a[0] = b[0] = b[1] = 1;
      a[1] = -1;
      a[pos] = b[pos] = t_half;
      const double d = dot(m, a, b, 0);
      if (pos < static_cast<std::size_t>(cs.terms)) {
        CHECK(d == 0.0);
      } else {
        CHECK(d == t_half * t_half);
      }
    }
  }
}

TEST_CASE("tensor core: FP8 on Ada and Hopper keeps 13 fraction bits, Blackwell keeps 25", "[tc]") {
  // 1 + 2^-13 survives a 13-bit accumulator, 1 + 2^-14 does not.
  for (const char* gpu : {"ada", "l40s", "h100", "h200", "b200"}) {
    for (const Format* in : {&formats::e4m3(), &formats::e5m2()}) {
      const auto m = tensor_core_preset(gpu, *in, fp32, std::string(gpu).starts_with("h") ? "wgmma" : "");
      INFO(m.name);
      std::vector<double> a(static_cast<std::size_t>(m.terms_per_step), 0.0), b = a;
      a[0] = b[0] = 1;
      a[1] = std::ldexp(1, -6);
      b[1] = std::ldexp(1, -7);
      CHECK(dot(m, a, b, 0) == 1 + std::ldexp(1, -13));
      b[1] = std::ldexp(1, -8);
      const bool blackwell = std::string(gpu) == "b200";
      CHECK(dot(m, a, b, 0) == (blackwell ? 1 + std::ldexp(1, -14) : 1.0));
      // And the result itself keeps 13 bits: products 1 and 2^-13 + 2^-14 ... cut at 2^-13.
      b[1] = 1.5 * std::ldexp(1, -7);
      CHECK(dot(m, a, b, 0) == (blackwell ? 1 + 1.5 * std::ldexp(1, -13) : 1 + std::ldexp(1, -13)));
    }
  }
}

TEST_CASE("tensor core: a result that rounds to zero is +0", "[tc]") {
  // Measured on an H100 (tc-stress): tiny negative sums that round to zero,
  // also with a subnormal binary32 C, come back +0, not IEEE's -0.
  const auto& bf16 = formats::bfloat16();
  const auto m = tensor_core_preset("h100", bf16, fp32);
  // -2^-150 (below binary32's smallest subnormal) truncates to zero.
  const double sum = dot(m, {-std::ldexp(1, -75)}, {std::ldexp(1, -75)}, 0.0);
  CHECK(sum == 0.0);
  CHECK(!std::signbit(sum));
  // C = 2^-149 (subnormal) plus products -2^-149 - 2^-150: -2^-150 again.
  const double with_c = dot(m, {-std::ldexp(1, -74), -std::ldexp(1, -75)},
                            {std::ldexp(1, -75), std::ldexp(1, -75)}, std::ldexp(1, -149));
  CHECK(with_c == 0.0);
  CHECK(!std::signbit(with_c));
  // binary16 output, rounding to nearest: -2^-26 is below half the smallest
  // subnormal 2^-24.
  const auto h = tensor_core_preset("h100", fp16, fp16);
  const double half = dot(h, {-std::ldexp(1, -13)}, {std::ldexp(1, -13)}, 0.0);
  CHECK(half == 0.0);
  CHECK(!std::signbit(half));
  // Tiny but not zero keeps its sign: -2^-149 is binary32's -min subnormal.
  CHECK(dot(m, {-std::ldexp(1, -74)}, {std::ldexp(1, -75)}, 0.0) == -std::ldexp(1, -149));
  // Through the GEMM kernel too.
  const auto model = AccumulationModel::parse("tc:h100:bf16:fp32");
  Matrix a(1, 1), b(1, 1), c(1, 1);
  a(0, 0) = -std::ldexp(1, -75);
  b(0, 0) = std::ldexp(1, -75);
  c(0, 0) = 0;
  const Matrix d = gemm(model, a, b, c);
  CHECK(d(0, 0) == 0.0);
  CHECK(!std::signbit(d(0, 0)));
}

TEST_CASE("tensor core: longer K chains steps, rounding to the output between steps", "[tc]") {
  // fp16 output: step 1 gives 1 + 2^-11 -> rounds (tie) to 1 in binary16, so
  // step 2 adds its 2^-11 to 1 again: 1 (a single step would give 1 + 2^-10).
  const auto m = tensor_core_preset("v100", fp16, fp16);
  std::vector<double> a(8, 0.0), b(8, 0.0);
  a[0] = b[0] = 1;
  a[1] = std::ldexp(1, -11);
  b[1] = 1;
  a[4] = std::ldexp(1, -11);
  b[4] = 1;
  CHECK(dot(m, a, b, 0) == 1.0);
  auto wide = m;
  wide.terms_per_step = 8;
  CHECK(dot(wide, a, b, 0) == 1 + std::ldexp(1, -10));
}

TEST_CASE("tensor core: IEEE special values", "[tc]") {
  const auto m = tensor_core_preset("h100", fp16, fp32);
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(std::isnan(dot(m, {inf, 1}, {0, 1}, 0)));
  CHECK(std::isnan(dot(m, {inf, -inf}, {1, 1}, 0)));
  CHECK(dot(m, {inf, 1}, {1, 1}, 0) == inf);
  CHECK(dot(m, {1, 1}, {1, 1}, -inf) == -inf);
  // Every term -0 and C = -0: +0, the fixed-point sum has no -0 (MMA-Sim;
  // no real-GPU case settles it: tensor_core_chain.hpp, zero_sum_result).
  CHECK(!std::signbit(dot(m, {-0.0}, {0.0}, -0.0)));
  CHECK(!std::signbit(dot(m, {1, -1}, {1, 1}, 0)));
  // Overflow of the fp16 output gives the infinity.
  const auto h = tensor_core_preset("h100", fp16, fp16);
  CHECK(dot(h, {65504, 65504}, {1, 1}, 0) == inf);
  CHECK(tensor_core_dot_bits(m, std::vector<double>{inf}, std::vector<double>{0.0}, 0) == 0x7fffffffu);
}

TEST_CASE("tensor core GEMM kernel equals the per-element model", "[tc][gemm]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd(0, 1);
  for (const char* spec : {"tc:h100:fp16:fp32", "tc:v100:fp16:fp16", "tc:a100:bf16:fp32", "tc:ada:e4m3:fp32",
                           "tc:h100:tf32:fp32", "tc:b200:fp16:fp16", "tc:h100:e4m3:fp16", "tc:h100:e5m2:fp32",
                           "tc:h100:e4m3:fp32:wgmma", "tc:b200:e4m3:fp32", "tc:b200:e5m2:fp16"}) {
    const auto model = AccumulationModel::parse(spec);
    const auto& tc = *model.bare_instruction();
    Matrix a(7, 37), b(37, 5), c(7, 5);
    for (Eigen::Index i = 0; i < a.size(); ++i)
      a.data()[i] = std::ldexp(nd(rng), static_cast<int>(rng() % 9) - 4);
    for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = nd(rng);
    for (Eigen::Index i = 0; i < c.size(); ++i) c.data()[i] = nd(rng);
    a = round_to_format(a, tc.input);
    b = round_to_format(b, tc.input);
    c = round_to_format(c, tc.output);
    a(0, 3) = 0;
    b(5, 1) = -0.0;
    const Matrix d = gemm(model, a, b, c);
    const Matrix d2 = gemm(model, a, b, c, GemmOptions{2});
    INFO(spec);
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      for (Eigen::Index j = 0; j < b.cols(); ++j) {
        std::vector<double> row(a.row(i).begin(), a.row(i).end());
        std::vector<double> col(b.col(j).begin(), b.col(j).end());
        const double ref = tensor_core_dot(tc, row, col, c(i, j));
        CHECK(d(i, j) == ref);
        CHECK(d2(i, j) == ref);
      }
  }
}
