// The op core's GEMM op against the arithmetic written out by hand from the
// GEMM library (sim::gemm) and the formats core (round_double), not from the
// trainer's helpers it is built on.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "bit_matrices.hpp"
#include "finite_differences.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/gemm_epilogue.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/train/gemm_op.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/layers/fp8.hpp"
#include "rpsim/train/policy.hpp"

using namespace rpsim;
using namespace rpsim::sim::train;
using namespace rpsim::sim::train::testing;

namespace {

// The scalar core's rounding (round_double, the code TestFloat and MPFR check).
double r(const Format& f, double x) {
  return to_double(f, round_double(f, x, RoundingMode::nearest_even));
}

Matrix rounded_by_hand(const Format& f, Matrix m) {
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = r(f, m.data()[i]);
  return m;
}

const Format& f16() {
  return formats::binary16();
}
const Format& f32() {
  return formats::binary32();
}

}  // namespace

TEST_CASE("train: GemmOp on a bare model is rpsim.gemm (operands rounded to the model's input format)",
          "[train][op-core]") {
  GemmSpec spec;
  spec.model = sim::AccumulationModel::parse("tc:h100:fp16:fp32");
  GemmOp op(spec);
  const Matrix a = random_matrix(7, 33, 1), b = random_matrix(33, 5, 2), c = random_matrix(7, 5, 3);
  GemmSaved saved;
  const Matrix d = op.forward(a, f32(), b, nullptr, {}, saved);
  const Matrix ar = rounded_by_hand(f16(), a), br = rounded_by_hand(f16(), b);
  CHECK(d == sim::gemm(spec.model, ar, br));
  const Matrix dc = op.forward(a, f32(), b, nullptr, {}, saved, &c);
  CHECK(dc == sim::gemm(spec.model, ar, br, rounded_by_hand(f32(), c)));
}

TEST_CASE("train: GemmOp under fp16-amp's linear rule: casts, GEMM, bias epilogue, output rounding",
          "[train][op-core]") {
  const PrecisionPolicy p = named_policy("fp16-amp");
  GemmOp op(GemmSpec::of(p.rule("linear"), p));
  const Matrix x = random_matrix(6, 20, 4), w = random_matrix(20, 3, 5), bias = random_matrix(1, 3, 6);
  GemmSaved saved;
  const Matrix y = op.forward(x, f32(), w, &bias, {}, saved);
  Matrix acc = sim::gemm(p.rule("linear").accumulation, rounded_by_hand(f16(), x), rounded_by_hand(f16(), w));
  for (Eigen::Index i = 0; i < acc.rows(); ++i)
    for (Eigen::Index j = 0; j < acc.cols(); ++j)
      acc(i, j) = r(f16(), r(f32(), acc(i, j) + r(f16(), bias(0, j))));
  CHECK(y == acc);

  // Backward: dY cast to fp16, dX = dY W^T and dW = X^T dY from the saved
  // casts, each rounded to fp16; the bias gradient the column sums of the
  // cast dY in index order in binary32, then fp16.
  const Matrix dy = random_matrix(6, 3, 7, 1e-3);
  const GemmGrads g = op.backward(saved, dy, true, true, true, {});
  const Matrix dyc = rounded_by_hand(f16(), dy);
  const auto& model = p.rule("linear").accumulation;
  CHECK(g.da == rounded_by_hand(f16(), sim::gemm(model, dyc, Matrix(rounded_by_hand(f16(), w).transpose()))));
  CHECK(g.db == rounded_by_hand(f16(), sim::gemm(model, Matrix(rounded_by_hand(f16(), x).transpose()), dyc)));
  for (Eigen::Index j = 0; j < 3; ++j) {
    double s = dyc(0, j);
    for (Eigen::Index i = 1; i < 6; ++i) s = r(f32(), s + dyc(i, j));
    CHECK(g.dbias(0, j) == r(f16(), s));
  }
  CHECK(g.dy_cast_flushed.size() == dy.size());
}

TEST_CASE("train: GemmOp per-tensor FP8 current scaling: scales, quantisation, dequantising epilogue",
          "[train][op-core]") {
  const PrecisionPolicy p = named_policy("fp8-current");
  const OpRule& rule = p.rule("linear");
  GemmOp op(GemmSpec::of(rule, p));
  // Binary32 tensors, as a float32 model holds them (TE's amax is a float).
  const Matrix x = rounded_by_hand(f32(), random_matrix(5, 16, 8, 30.0)),
               w = rounded_by_hand(f32(), random_matrix(16, 4, 9));
  const Matrix bias = random_matrix(1, 4, 10);
  GemmSaved saved;
  const Matrix y = op.forward(x, f32(), w, &bias, {}, saved);
  // Transformer Engine's current scaling: scale = fl32(448 / amax); x * scale
  // in binary32, clamped to +-448, rounded to e4m3.
  const Format& e4m3 = *rule.compute;
  auto quantised = [&](const Matrix& m, double& scale) {
    scale = r(f32(), 448.0 / m.cwiseAbs().maxCoeff());
    Matrix q = m;
    for (Eigen::Index i = 0; i < q.size(); ++i)
      q.data()[i] = r(e4m3, std::clamp(r(f32(), q.data()[i] * scale), -448.0, 448.0));
    return q;
  };
  double sx = 0, sw = 0;
  Matrix acc = sim::gemm(rule.accumulation, quantised(x, sx), quantised(w, sw));
  const double inv = r(f32(), 1.0 / (sx * sw));
  for (Eigen::Index i = 0; i < acc.rows(); ++i)
    for (Eigen::Index j = 0; j < acc.cols(); ++j)
      acc(i, j) = r(*rule.output, r(f32(), r(f32(), acc(i, j) * inv) + r(f32(), bias(0, j))));
  CHECK(y == acc);
  REQUIRE(op.fp8_stats().size() == 3);
  CHECK(op.fp8_stats()[0].second->scale_min == sx);
  CHECK(op.fp8_stats()[0].second->amax == x.cwiseAbs().maxCoeff());
}

TEST_CASE(
    "train: GemmOp's bias gradient is each column's sum in order, NaN, infinities and wide terms included",
    "[train][op-core]") {
  // 37 rows (the binary32 check's 4-wide steps and a tail) by 11 columns
  // (a block of 8 and one of 3): column 2 holds a NaN, column 9 an infinity.
  // Under fp16-amp the sum reads dY cast to fp16; under per-tensor FP8 the
  // unquantised dY, whose terms are not binary32 values (the generic sum).
  for (const char* policy : {"fp16-amp", "fp8-current"}) {
    const PrecisionPolicy p = named_policy(policy);
    const OpRule& rule = p.rule("linear");
    GemmOp op(GemmSpec::of(rule, p));
    const Matrix x = rounded_by_hand(f32(), random_matrix(37, 6, 31)),
                 w = rounded_by_hand(f32(), random_matrix(6, 11, 32));
    const Matrix bias = random_matrix(1, 11, 33);
    GemmSaved saved;
    op.forward(x, f32(), w, &bias, {}, saved);
    Matrix dy = random_matrix(37, 11, 34, 1e-2);
    dy(17, 2) = std::nan("");
    dy(30, 9) = -INFINITY;
    const bool fp8 = std::string(policy) == "fp8-current";
    const Matrix terms = fp8 ? dy : rounded_by_hand(f16(), dy);
    const Format& sum_format = fp8 ? rule.accumulation.output_format() : f32();
    const GemmGrads g = op.backward(saved, dy, true, true, true, {});
    for (Eigen::Index j = 0; j < 11; ++j) {
      double s = terms(0, j);
      for (Eigen::Index i = 1; i < 37; ++i) s = r(sum_format, s + terms(i, j));
      const double want = r(*rule.output, s);
      INFO(policy << ", column " << j);
      CHECK(std::isnan(g.dbias(0, j)) == std::isnan(want));
      if (!std::isnan(want)) CHECK(g.dbias(0, j) == want);
    }
    CHECK(std::isnan(g.dbias(0, 2)));
    CHECK(g.dbias(0, 9) == -INFINITY);
  }
}

TEST_CASE("train: GemmOp backs every forward call with its own saved state", "[train][op-core]") {
  // An op called twice per step (a shared layer, an RNN's time steps): each
  // backward reads its own call's operands.
  const PrecisionPolicy p = named_policy("bf16-amp");
  GemmOp op(GemmSpec::of(p.rule("matmul"), p));
  const Matrix a1 = random_matrix(3, 8, 11), a2 = random_matrix(3, 8, 12), b = random_matrix(8, 2, 13);
  const Matrix dy = random_matrix(3, 2, 14);
  GemmSaved s1, s2;
  op.forward(a1, f32(), b, nullptr, {}, s1);
  op.forward(a2, f32(), b, nullptr, {}, s2);
  GemmSaved alone;
  GemmOp fresh(GemmSpec::of(p.rule("matmul"), p));
  fresh.forward(a1, f32(), b, nullptr, {}, alone);
  CHECK(op.backward(s1, dy, true, true, false, {}).db == fresh.backward(alone, dy, true, true, false, {}).db);
  CHECK(op.backward(s2, dy, true, true, false, {}).db != op.backward(s1, dy, true, true, false, {}).db);
}

TEST_CASE("train: GemmOp refuses a block-scaled instruction without a recipe, naming the model",
          "[train][op-core]") {
  GemmSpec spec;
  spec.model = sim::AccumulationModel::parse("tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0");
  GemmOp op(spec);
  GemmSaved saved;
  CHECK_THROWS_WITH(op.forward(random_matrix(2, 32, 1), f32(), random_matrix(32, 2, 2), nullptr, {}, saved),
                    Catch::Contains("block-scaled operands") && Catch::Contains("tcgen05.mma"));
}

TEST_CASE("train: GemmOp's entrywise cast: A cast entry by entry first is the same forward and backward",
          "[train][op-core]") {
  // A convolution casts its input before im2col (a k*k-th of the entries)
  // and gives the patches as values of the compute format: the GEMM then
  // skips its cast, and nothing may change.
  const PrecisionPolicy p = named_policy("fp16-amp");
  GemmOp op(GemmSpec::of(p.rule("conv2d"), p));
  const Format* fmt = op.entrywise_cast(f32());
  REQUIRE(fmt == &f16());
  const Matrix a = random_matrix(9, 27, 21), b = random_matrix(27, 4, 22), bias = random_matrix(1, 4, 23),
               dy = random_matrix(9, 4, 24, 1e-3);
  GemmSaved whole, early;
  const Matrix y = op.forward(a, f32(), b, &bias, {}, whole);
  CHECK(op.forward(rounded_by_hand(f16(), a), *fmt, b, &bias, {}, early) == y);
  const GemmGrads g = op.backward(whole, dy, true, true, true, {}),
                  h = op.backward(early, dy, true, true, true, {});
  CHECK((g.da == h.da && g.db == h.db && g.dbias == h.dbias));

  // None where the cast is no such rounding, or changes nothing: A already
  // of the compute format; a rule following its inputs; FP8 scaling (a
  // per-tensor scale first); a bare model; a stochastic tensor rounding
  // (each entry's draw depends on its place).
  CHECK(op.entrywise_cast(f16()) == nullptr);
  GemmSpec follow = GemmSpec::of(p.rule("conv2d"), p);
  follow.follow_inputs = true;
  CHECK(GemmOp(follow).entrywise_cast(f32()) == nullptr);
  const PrecisionPolicy fp8 = named_policy("fp8-current");
  CHECK(GemmOp(GemmSpec::of(fp8.rule("linear"), fp8)).entrywise_cast(f32()) == nullptr);
  GemmSpec bare;
  bare.model = sim::AccumulationModel::parse("tc:h100:fp16:fp32");
  CHECK(GemmOp(bare).entrywise_cast(f32()) == nullptr);
  const ScopedTensorRounding sr(RoundingMode::stochastic, RandomStream{1, 2});
  CHECK(op.entrywise_cast(f32()) == nullptr);
}

TEST_CASE("train: GemmOp's block-scaled weight gradient is A^T's row blocks times dY's column blocks",
          "[train][op-core]") {
  // The weight gradient of a block-scaled GEMM by its definition: A (rotated
  // by the recipe's Hadamard transform where it has one) transposed, its rows
  // quantised; dY's columns quantised (stochastically where the recipe says,
  // on GEMM 3's key); their GEMM on the rule's model (GEMM 1's key), times
  // NVFP4's alpha in the accumulation format, in the rule's output format.
  const Matrix a = random_matrix(48, 40, 21), b = random_matrix(40, 24, 22), dy = random_matrix(48, 24, 23);
  for (const char* name : {"mxfp8", "nvfp4"}) {
    INFO(name);
    const PrecisionPolicy p = named_policy(name);
    const OpRule& rule = p.rule("linear");
    const Fp8Recipe& rec = p.fp8;
    GemmOp op(GemmSpec::of(rule, p));
    GemmKeys keys;
    keys.base = {5, 700};
    keys.keyed = true;
    keys.hadamard_seed = 9;
    GemmSaved saved;
    op.forward(a, f32(), b, nullptr, keys, saved);
    const GemmGrads g = op.backward(saved, dy, false, true, false, keys);

    const Matrix t = !rec.hadamard ? Matrix()
                     : rec.hadamard_signs == Fp8Recipe::HadamardSigns::te
                         ? te_hadamard_transform(rec.hadamard)
                         : hadamard_transform(rec.hadamard, 9);
    const RandomStream sr = keys.stream(3);
    const BlockOperand dy_cols =
        block_operand(rec.hadamard ? hadamard_rows(dy, t) : dy, *rule.backward_compute, rec,
                      {0, false, rec.gradient_sr ? &sr : nullptr}, nullptr);
    const BlockOperand at = block_operand(Matrix((rec.hadamard ? hadamard_rows(a, t) : a).transpose()),
                                          *rule.compute, rec, {1}, nullptr);
    Matrix want = block_matmul(at, dy_cols, rule.accumulation, keys.stream(1));
    if (rec.scaling == Fp8Scaling::nvfp4) {
      want *= sim::nvfp4_alpha(at.tensor_amax, dy_cols.tensor_amax);
      for (Eigen::Index i = 0; i < want.size(); ++i)
        want.data()[i] = r(rule.accumulation.output_format(), want.data()[i]);
    }
    if (rule.output) want = rounded_by_hand(*rule.output, want);
    CHECK(rpsim::test::same_bits(g.db, want));
    CHECK(rec.hadamard == (std::string(name) == "nvfp4" ? 16 : 0));  // both paths of the rotation
  }
}
