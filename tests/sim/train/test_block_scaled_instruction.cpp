// Block-scaled policies on a block-scaled Tensor Core instruction
// (block_gemm.hpp): the block scales go into the GEMM as SFA / SFB. Where
// both are exact the result is the scale-around-GEMM one; on random data it
// is the instruction's GEMM of formats' own MX quantisation, worked out here;
// a run trains next to the binary32 path; a preset that disagrees with the
// recipe is a ConfigError naming the field.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "finite_differences.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/config/config.hpp"
#include "rpsim/config/policy_json.hpp"
#include "rpsim/formats/block_scale.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/policy.hpp"
#include "rpsim/train/trainer.hpp"

using namespace rpsim;
using namespace rpsim::sim::config;
using namespace rpsim::sim::train;
using namespace rpsim::sim::train::testing;
using rpsim::sim::AccumulationModel;

namespace {

const char* kMx8 = "tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0";
const char* kNv4 = "tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3";

PrecisionPolicy policy(const std::string& text) {
  return policy_from_json(nlohmann::json::parse(text), "policy");
}

Matrix integers(Eigen::Index r, Eigen::Index c, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-3, 3);
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
  return m;
}

}  // namespace

TEST_CASE("train: a block-scaled GEMM on the instruction equals scale-around-GEMM where both are exact",
          "[train]") {
  // Integers in [-3, 3]: MX scale 2^-7, elements v * 128 (e4m3 holds 128,
  // 256, 384); every partial sum (|sum| <= 9 * 80) exact in both datapaths.
  const Matrix x = integers(5, 80, 1), w = integers(80, 3, 2);  // K = 80: a padded last block
  const Fp8Recipe r = named_policy("mxfp8").fp8;
  const BlockOperand a = block_operand(x, formats::e4m3(), r, {1}),
                     b = block_operand(w, formats::e4m3(), r, {0});
  const Matrix on_tc = block_matmul(a, b, AccumulationModel::parse(kMx8), {});
  const Matrix around = block_matmul(a, b, AccumulationModel::parse("sequential:fp32:rne"), {});
  CHECK(on_tc == around);
  CHECK(on_tc == x * w);
}

TEST_CASE("train: block operands without their scales where the GEMM does not read them", "[train]") {
  const Matrix x = random_matrix(6, 80, 5, 2.0), w = random_matrix(80, 3, 6, 0.5);
  const Fp8Recipe r = named_policy("mxfp8").fp8;
  const auto plain = AccumulationModel::parse("sequential:fp32:rne"), on_tc = AccumulationModel::parse(kMx8);
  CHECK_FALSE(block_scales_read(r, plain));
  CHECK(block_scales_read(r, on_tc));
  CHECK(block_scales_read(named_policy("fp8-blockwise").fp8, plain));
  const BlockOperand a = block_operand(x, formats::e4m3(), r, {1}),
                     b = block_operand(w, formats::e4m3(), r, {0});
  const BlockOperand a0 = block_operand(x, formats::e4m3(), r, {1}, nullptr, nullptr, false),
                     b0 = block_operand(w, formats::e4m3(), r, {0}, nullptr, nullptr, false);
  CHECK(a0.scales.size() == 0);
  CHECK(a0.values == a.values);  // the same quantisation
  CHECK(block_matmul(a0, b0, plain, {}) == block_matmul(a, b, plain, {}));
  // An instruction that reads them says so rather than reading nothing.
  CHECK_THROWS_WITH(block_matmul(a0, b0, on_tc, {}), Catch::Contains("without its scales"));
}

TEST_CASE("train: a block-scaled GEMM on the instruction takes formats' MX elements and scales as SFA/SFB",
          "[train]") {
  const Matrix x = random_matrix(4, 64, 3, 2.0), w = random_matrix(64, 3, 4, 0.5);
  const Fp8Recipe r = named_policy("mxfp8").fp8;
  const Matrix got =
      block_matmul(block_operand(x, formats::e4m3(), r, {1}), block_operand(w, formats::e4m3(), r, {0}),
                   AccumulationModel::parse(kMx8), {});
  // The same GEMM assembled from formats' mx_quantize line by line.
  Matrix ea(4, 64), eb(64, 3), sfa(4, 2), sfb(2, 3);
  for (Eigen::Index i = 0; i < 4; ++i) {
    std::vector<double> row;
    for (Eigen::Index k = 0; k < 64; ++k) row.push_back(x(i, k));
    const BlockQuantized q = mx_quantize(formats::e4m3(), row, 32);
    for (Eigen::Index k = 0; k < 64; ++k) ea(i, k) = q.elements[std::size_t(k)];
    for (Eigen::Index t = 0; t < 2; ++t) sfa(i, t) = q.scales[std::size_t(t)];
  }
  for (Eigen::Index j = 0; j < 3; ++j) {
    std::vector<double> col(w.col(j).data(), w.col(j).data() + 64);
    const BlockQuantized q = mx_quantize(formats::e4m3(), col, 32);
    for (Eigen::Index k = 0; k < 64; ++k) eb(k, j) = q.elements[std::size_t(k)];
    for (Eigen::Index t = 0; t < 2; ++t) sfb(t, j) = q.scales[std::size_t(t)];
  }
  sim::GemmScales s;
  s.sfa = sfa;
  s.sfb = sfb;
  const Matrix want = sim::gemm(AccumulationModel::parse(kMx8), ea, eb, Matrix::Zero(4, 3), s);
  CHECK(got == want);
  // Next to the binary32 GEMM of the dequantised values (the two datapaths
  // round differently, by about an ulp of binary32).
  const Matrix around =
      block_matmul(block_operand(x, formats::e4m3(), r, {1}), block_operand(w, formats::e4m3(), r, {0}),
                   AccumulationModel::parse("sequential:fp32:rne"), {});
  CHECK((got - around).cwiseAbs().maxCoeff() <= 1e-5 * around.cwiseAbs().maxCoeff());
}

TEST_CASE("train: mxfp8 and nvfp4 train on B200's block-scaled instructions next to the binary32 path",
          "[train]") {
  for (const auto& [name, tc] : {std::pair{"mxfp8", kMx8}, {"nvfp4", kNv4}}) {
    INFO(name);
    const auto run_with = [&, name = name](const nlohmann::json& pol) {
      nlohmann::json j = nlohmann::json::parse(R"({
        "name": "tc-run", "seed": 5, "model": {"type": "mlp", "hidden": [32]},
        "data": {"name": "synthetic", "synthetic_train_size": 256, "synthetic_test_size": 64},
        "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},
        "batch_size": 32, "steps": 4, "evaluate": false, "telemetry": {"histogram_steps": []}})");
      j["policy"] = pol;
      (void)name;
      return run(parse_config(j), RunOptions{}).final_loss;
    };
    const double base = run_with(name);
    const double on_tc = run_with({{"name", name}, {"ops", {{"linear", {{"accumulation", tc}}}}}});
    CHECK(std::isfinite(on_tc));
    CHECK(std::fabs(on_tc - base) <= 1e-3 * std::fabs(base));
  }
}

TEST_CASE("train: a block-scaled instruction that disagrees with the recipe names the field", "[train]") {
  // NVFP4 makes blocks of 16; the instruction is asked for 32.
  CHECK_THROWS_AS(
      policy(
          R"({"name": "nvfp4", "ops": {"linear": {"accumulation": "tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3:scale_block=32"}}})"),
      ConfigError);
  CHECK_THROWS_WITH(
      policy(
          R"({"name": "nvfp4", "ops": {"linear": {"accumulation": "tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3:scale_block=32"}}})"),
      Catch::Contains("policy.ops.linear.accumulation") && Catch::Contains("blocks of 32 (scale_block)") &&
          Catch::Contains("blocks of 16 (fp8.block_size)"));
  // MX scales are E8M0.
  CHECK_THROWS_WITH(
      policy(
          R"({"name": "mxfp4", "ops": {"linear": {"accumulation": "tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3:scale_block=32"}}})"),
      Catch::Contains("policy.ops.linear.accumulation") && Catch::Contains("takes ue4m3 scales"));
  // A policy that does not block-scale the op's inputs.
  CHECK_THROWS_WITH(
      policy(
          R"({"name": "fp32", "ops": {"linear": {"accumulation": "tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0"}}})"),
      Catch::Contains("policy.ops.linear.accumulation") && Catch::Contains("does not block-scale"));
  // A recipe's block that the instruction takes is accepted (mxfp8's 32).
  CHECK_NOTHROW(policy(
      R"({"name": "mxfp8", "ops": {"linear": {"accumulation": "tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0"}}})"));
}
