// Scaled GEMMs (gemm.hpp GemmScales): a K longer than one instruction is the
// chain of block-scaled instructions with C fed forward (checked against a
// loop over the scalar instruction API here), scales of 1 are the unscaled
// instruction, _scaled_mm-style scales are the binary32 epilogue, and bad
// scales are errors naming the array.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/formats/rounding.hpp"

namespace {

using namespace rpsim;
using namespace rpsim::sim;

const TensorCoreModel& tc_of(const AccumulationModel& m) {
  return *m.bare_instruction();
}

// A random matrix of values of `f` (normal, spread over 2^-4 .. 2^4).
Matrix random_values(Eigen::Index r, Eigen::Index c, const Format& f, std::mt19937_64& rng) {
  std::normal_distribution<double> nd(0, 1);
  std::uniform_int_distribution<int> e(-4, 4);
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = to_double(f, round_double(f, std::ldexp(nd(rng), e(rng)), RoundingMode::nearest_even));
  return m;
}

// Random scales of the model's scale format: 2^-8 .. 2^8 (ue8m0), or
// positive E4M3 values (ue4m3).
Matrix random_scales(Eigen::Index r, Eigen::Index c, const Format& scale, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> e(-8, 8);
  std::uniform_real_distribution<double> u(0.02, 400);
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = scale.man_bits == 0
                      ? std::ldexp(1.0, e(rng))
                      : to_double(scale, round_double(scale, u(rng), RoundingMode::nearest_even));
  return m;
}

// A random block-scaled problem for `m`: A (rows x k), B (k x cols), C, and
// SFA / SFB of the model's scale format.
struct Problem {
  Matrix a, b, c;
  GemmScales s;
};

Problem random_problem(const TensorCoreModel& m, Eigen::Index rows, Eigen::Index k, Eigen::Index cols,
                       std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Problem p;
  p.a = random_values(rows, k, m.input, rng);
  p.b = random_values(k, cols, m.b_input(), rng);
  p.c = random_values(rows, cols, m.output, rng);
  p.s.sfa = random_scales(rows, k / m.scale_block, *m.scale, rng);
  p.s.sfb = random_scales(k / m.scale_block, cols, *m.scale, rng);
  return p;
}

// D(i, j) by a loop over the scalar instruction API: instructions of
// instruction_terms() products with their blocks' scales, each result (the
// output format's encoding) C of the next.
double chained(const TensorCoreModel& m, const Matrix& a, const Matrix& b, double c, const GemmScales& s,
               Eigen::Index i, Eigen::Index j) {
  const Eigen::Index per = m.instruction_terms(), blk = m.scale_block;
  for (Eigen::Index k0 = 0; k0 < a.cols(); k0 += per) {
    const Eigen::Index n = std::min(per, a.cols() - k0);
    std::vector<double> av, bv, sa, sb;
    for (Eigen::Index t = k0; t < k0 + n; ++t) {
      av.push_back(a(i, t));
      bv.push_back(b(t, j));
    }
    for (Eigen::Index t = k0 / blk; t < (k0 + n) / blk; ++t) {
      sa.push_back((*s.sfa)(i, t));
      sb.push_back((*s.sfb)(t, j));
    }
    c = to_double(m.output, tensor_core_dot_bits(m, av, bv, c, sa, sb));
  }
  return c;
}

}  // namespace

TEST_CASE("gemm scaled: a long K is the chain of block-scaled instructions, C fed forward",
          "[gemm][block-scale]") {
  // mxf8f6f4 (K = 32 per instruction, block 32) and mxf4nvf4 (K = 64, block
  // 16 ue4m3 and 32 ue8m0); K = 208 leaves a last instruction of 16 products.
  for (const std::string spec :
       {"tc:b200:e4m3:fp32:tcgen05.mma:input_b=e5m2:scale=ue8m0", "tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3",
        "tc:rtx5090:e2m1:fp32:mma.sync:scale=ue8m0:scale_block=32"}) {
    INFO(spec);
    const AccumulationModel model = AccumulationModel::parse(spec);
    const TensorCoreModel& m = tc_of(model);
    const Eigen::Index k = m.scale_block == 16 ? 208 : 224;
    const Problem p = random_problem(m, 5, k, 6, 7);
    const Matrix &a = p.a, &b = p.b, &c = p.c;
    const GemmScales& s = p.s;
    const Matrix d = gemm(model, a, b, c, s, GemmOptions{2});
    int nonzero = 0;
    for (Eigen::Index i = 0; i < d.rows(); ++i)
      for (Eigen::Index j = 0; j < d.cols(); ++j) {
        const double want = chained(m, a, b, c(i, j), s, i, j);
        CHECK(std::bit_cast<std::uint64_t>(d(i, j)) == std::bit_cast<std::uint64_t>(want));
        nonzero += d(i, j) != 0;
      }
    CHECK(nonzero > 20);
    // The chain is not one long instruction: the same K as a single step differs somewhere.
    TensorCoreModel one = m;
    one.terms_per_step = static_cast<int>(k);
    const Matrix d1 = gemm(AccumulationModel(one), a, b, c, s);
    CHECK(d1 != d);
  }
}

TEST_CASE("gemm scaled: a NaN scale makes its instructions' results NaN, the other elements keep their bits",
          "[gemm][block-scale]") {
  // The GEMM decodes each row of A and column of B once (mxf8f6f4) or runs
  // the instruction per element (product groups): both against the scalar
  // instruction API, with E8M0's NaN (0xff) in one block of SFA and one of
  // SFB, and K = 224 (a last, shorter instruction where an instruction
  // holds 64 products).
  for (const std::string spec :
       {"tc:b200:e4m3:fp32:tcgen05.mma:input_b=e5m2:scale=ue8m0", "tc:b200:e2m1:fp32:tcgen05.mma:scale=ue8m0",
        "tc:rtx5090:e2m1:fp32:mma.sync:scale=ue8m0:scale_block=32"}) {
    INFO(spec);
    const AccumulationModel model = AccumulationModel::parse(spec);
    const TensorCoreModel& m = tc_of(model);
    const Eigen::Index k = 224, blocks = k / m.scale_block;
    Problem p = random_problem(m, 6, k, 5, 11);
    const Matrix &a = p.a, &b = p.b, &c = p.c;
    GemmScales& s = p.s;
    (*s.sfa)(2, blocks - 1) = std::nan("");
    (*s.sfb)(1, 3) = std::nan("");
    const Matrix d = gemm(model, a, b, c, s, GemmOptions{2});
    int nans = 0, numbers = 0;
    for (Eigen::Index i = 0; i < d.rows(); ++i)
      for (Eigen::Index j = 0; j < d.cols(); ++j) {
        const double want = chained(m, a, b, c(i, j), s, i, j);
        INFO(i << ", " << j);
        REQUIRE(std::isnan(d(i, j)) == std::isnan(want));
        if (std::isnan(want)) {
          ++nans;
          continue;
        }
        CHECK(std::bit_cast<std::uint64_t>(d(i, j)) == std::bit_cast<std::uint64_t>(want));
        numbers += d(i, j) != 0;
      }
    // Row 2 and column 3 are NaN throughout, nothing else.
    CHECK(nans == 5 + 6 - 1);
    CHECK(numbers > 15);
  }
}

TEST_CASE("gemm scaled: scales of 1 (E8M0 127) give the unscaled instruction's GEMM", "[gemm][block-scale]") {
  // FP8 only: e2m1 has no unscaled instruction (kind::mxf4nvf4 always scales).
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0", "tc:b200:e4m3:fp32:tcgen05.mma"},
      {"tc:b200:e5m2:fp32:tcgen05.mma:input_b=e4m3:scale=ue8m0",
       "tc:b200:e5m2:fp32:tcgen05.mma:input_b=e4m3"},
      {"tc:rtx5090:e4m3:fp32:mma.sync:scale=ue8m0", "tc:rtx5090:e4m3:fp32"}};
  for (const auto& [scaled, plain] : pairs) {
    INFO(scaled);
    const AccumulationModel ms = AccumulationModel::parse(scaled), mp = AccumulationModel::parse(plain);
    std::mt19937_64 rng(11);
    const Matrix a = random_values(7, 256, tc_of(ms).input, rng),
                 b = random_values(256, 5, tc_of(ms).b_input(), rng);
    const Matrix c = random_values(7, 5, formats::binary32(), rng);
    GemmScales ones;
    ones.sfa = Matrix::Constant(7, 8, 1.0);
    ones.sfb = Matrix::Constant(8, 5, 1.0);
    const Matrix ds = gemm(ms, a, b, c, ones), dp = gemm(mp, a, b, c);
    for (Eigen::Index i = 0; i < ds.size(); ++i)
      CHECK(std::bit_cast<std::uint64_t>(ds.data()[i]) == std::bit_cast<std::uint64_t>(dp.data()[i]));
    // A scale of 2 on one block of A moves its row.
    GemmScales two = ones;
    (*two.sfa)(3, 2) = 2.0;
    const Matrix d2 = gemm(ms, a, b, c, two);
    CHECK(d2.row(3) != ds.row(3));
    CHECK(d2.row(2) == ds.row(2));
  }
}

TEST_CASE("gemm scaled: _scaled_mm scales per tensor and per row are the binary32 epilogue",
          "[gemm][scaled-mm]") {
  const AccumulationModel model = AccumulationModel::parse("tc:h100:e4m3:fp32:wgmma");
  std::mt19937_64 rng(3);
  const Matrix a = random_values(4, 64, formats::e4m3(), rng), b = random_values(64, 3, formats::e4m3(), rng);
  const Matrix c = random_values(4, 3, formats::binary32(), rng);
  const Matrix ab = gemm(model, a, b);
  GemmScales s;
  s.scale_a = Matrix(4, 1);
  *s.scale_a << 0.5, 3.0, static_cast<double>(0.1f), 7.0;  // 0.1f: not a power of two
  s.scale_b = Matrix::Constant(1, 1, 1.5);
  const Matrix d = gemm(model, a, b, c, s);
  for (Eigen::Index i = 0; i < 4; ++i)
    for (Eigen::Index j = 0; j < 3; ++j) {
      const float scale = static_cast<float>((*s.scale_a)(i, 0)) * 1.5f;
      const float want = scale * static_cast<float>(ab(i, j)) + static_cast<float>(c(i, j));
      CHECK(d(i, j) == static_cast<double>(want));
    }
}

TEST_CASE("gemm scaled: bad scales are errors naming the array, the block and the format",
          "[gemm][block-scale]") {
  const AccumulationModel model = AccumulationModel::parse("tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0");
  const Matrix a = Matrix::Zero(4, 64), b = Matrix::Zero(64, 3), c = Matrix::Zero(4, 3);
  GemmScales s;
  s.sfa = Matrix::Constant(4, 2, 1.0);
  s.sfb = Matrix::Constant(2, 3, 1.0);
  CHECK_NOTHROW(gemm(model, a, b, c, s));
  auto fails = [&](GemmScales bad, const std::string& what, Eigen::Index k = 64) {
    CHECK_THROWS_WITH(gemm(model, Matrix::Zero(4, k), Matrix::Zero(k, 3), c, bad), Catch::Contains(what));
  };
  GemmScales x = s;
  x.sfa = Matrix::Constant(4, 3, 1.0);
  fails(x, "SFA: expected 4x2 (M x K/32), given 4x3");
  x = s;
  x.sfb = Matrix::Constant(3, 2, 1.0);
  fails(x, "SFB: expected 2x3 (K/32 x N), given 3x2");
  x = s;
  x.sfb.reset();
  fails(x, "SFB: model");
  fails(s, "K: 48 is not a multiple of the block 32", 48);
  x = s;
  (*x.sfa)(1, 1) = 3.0;
  fails(x, "SFA[1, 1] = 3 is not a value of the scale format e8m0");
  CHECK_THROWS_WITH(gemm(model, a, b, c), Catch::Contains("takes block scales: give SFA and SFB"));
  CHECK_THROWS_WITH(gemm(AccumulationModel::parse("tc:b200:e4m3:fp32:tcgen05.mma"), a, b, c, s),
                    Catch::Contains("takes no block scales"));
  GemmScales t;
  t.scale_a = Matrix::Constant(3, 1, 1.0);
  CHECK_THROWS_WITH(gemm(AccumulationModel::parse("tc:h100:e4m3:fp32:wgmma"), a, b, c, t),
                    Catch::Contains("scale_a: expected 1x1 (per tensor) or 4x1 (per row of A), given 3x1"));
  // The spec: a scale format the instruction does not take, a block it does not.
  CHECK_THROWS_WITH(AccumulationModel::parse("tc:b200:e4m3:fp32:tcgen05.mma:scale=ue4m3"),
                    Catch::Contains("with ue4m3 block scales"));
  CHECK_THROWS_WITH(AccumulationModel::parse("tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0:scale_block=16"),
                    Catch::Contains("scale_block 16 is not 32"));
  CHECK_THROWS_WITH(AccumulationModel::parse("tc:b200:e2m1:fp32:tcgen05.mma:scale=ue5m3"),
                    Catch::Contains("scale='ue5m3' is not a block-scale format (ue8m0 ue4m3)"));
}

TEST_CASE("gemm scaled: a block-scaled spec round-trips", "[gemm][block-scale]") {
  for (const std::string spec :
       {"tc:b200:e4m3:binary32:tcgen05.mma:input_b=e5m2:scale=ue8m0:scale_block=32",
        "tc:b200:e2m1:binary32:tcgen05.mma:scale=ue4m3:scale_block=16",
        "tc:rtx5090:e2m1:binary32:scale=ue8m0:scale_block=32", "tc:b200:e4m3:binary32:tcgen05.mma"}) {
    CHECK(AccumulationModel::parse(spec).spec() == spec);
  }
}

TEST_CASE("gemm scaled: AMD mfma and FP64 GEMMs are the chain of their instructions, C fed forward",
          "[gemm][mfma]") {
  // Spec and one instruction's K (MMA-Sim's qualifiers: f32_16x16x32_fp8_fp8, f32_16x16x16_bf16,
  // f32_32x32x8bf16_1k, f32_16x16x16f16, m8n8k4 f64, f64_16x16x4f64).
  const std::vector<std::pair<std::string, int>> cases = {
      {"tc:mi300:e4m3fnuz:fp32:mfma", 32}, {"tc:mi300:bf16:fp32:mfma", 16}, {"tc:mi250:bf16:fp32:mfma.1k", 8},
      {"tc:mi100:fp16:fp32:mfma", 16},     {"tc:h100:fp64:fp64", 4},        {"tc:mi250:fp64:fp64:mfma", 4}};
  for (const auto& [spec, per] : cases) {
    INFO(spec);
    const AccumulationModel model = AccumulationModel::parse(spec);
    const TensorCoreModel& m = tc_of(model);
    std::mt19937_64 rng(5);
    const Eigen::Index k = 6 * per;
    const Matrix a = random_values(4, k, m.input, rng), b = random_values(k, 3, m.b_input(), rng);
    const Matrix c = random_values(4, 3, m.output, rng);
    const Matrix d = gemm(model, a, b, c);
    for (Eigen::Index i = 0; i < 4; ++i)
      for (Eigen::Index j = 0; j < 3; ++j) {
        double acc = c(i, j);
        for (Eigen::Index k0 = 0; k0 < k; k0 += per) {
          std::vector<double> av, bv;
          for (Eigen::Index t = k0; t < k0 + per; ++t) {
            av.push_back(a(i, t));
            bv.push_back(b(t, j));
          }
          acc = to_double(m.output, tensor_core_dot_bits(m, av, bv, acc));
        }
        CHECK(d(i, j) == acc);
        CHECK(d(i, j) != 0);
      }
  }
}
