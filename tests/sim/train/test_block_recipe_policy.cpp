// The block-scaled policies on formats' recipe rows (block_gemm.hpp
// block_quantize_recipe; test_block_scaled_policy checks it against formats'
// MX and NVFP4 quantisers line by line), the policy keys fp8.scale_rule, fp8.nvfp4_formula
// and fp8.pow2_scales, the fp8-blockwise row (1x128 and 128x128 against the
// te-fp8-block row, its GEMM through sim's gemm_blockwise), TE's Hadamard
// transform.
#include <fmt/format.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>

#include "bit_matrices.hpp"
#include "finite_differences.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/config/config.hpp"
#include "rpsim/config/policy_json.hpp"
#include "rpsim/formats/recipe.hpp"
#include "rpsim/train/layers.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/policy.hpp"
#include "rpsim/train/trainer.hpp"

using namespace rpsim;
using namespace rpsim::sim::config;
using namespace rpsim::sim::train;
using namespace rpsim::sim::train::testing;

namespace {

// Entries of wide range, binary32, some zero.
Matrix wide_matrix(Eigen::Index r, Eigen::Index c, std::uint64_t stream) {
  Matrix m = random_matrix(r, c, stream);
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double e = std::ldexp(1.0, int(i * 7 % 23) - 11);
    m.data()[i] = (i % 13 == 0) ? 0.0 : double(float(m.data()[i] * e));
  }
  return m;
}

PrecisionPolicy pol(const char* text) {
  return policy_from_json(nlohmann::json::parse(text), "policy");
}

// wide_matrix with `specials` in a diagonal stripe and row 20 all zero (a
// line whose blocks are all zero).
Matrix with_specials(std::uint64_t stream, const double (&specials)[10]) {
  Matrix x = wide_matrix(37, 75, stream);
  for (Eigen::Index i = 0; i < 10; ++i) x(3 + i, 5 * i + 1) = specials[i];
  x.row(20).setZero();
  return x;
}

// block_quantize_recipe's line path (block_lines.cpp) on x against
// recipe::quantize_group_block entry by entry (ScopedElementwiseBlockQuantiser):
// values, scales, tensor scale, counts, scale range and amax, to the bit (a
// scale range is NaN where no block has a finite scale). The line path's values
// and statistics.
std::pair<Matrix, Fp8Stats> as_elementwise(const Matrix& x, const Format& f, const Fp8Recipe& r,
                                           const BlockLayout& layout) {
  Fp8Stats fast_stats, slow_stats;
  Matrix fast_scales, slow_scales;
  double fast_ts = 0, slow_ts = 0;
  const Matrix fast = block_quantize_recipe(x, f, r, layout, &fast_stats, &fast_ts, &fast_scales);
  Matrix slow;
  {
    ScopedElementwiseBlockQuantiser elementwise;
    slow = block_quantize_recipe(x, f, r, layout, &slow_stats, &slow_ts, &slow_scales);
  }
  const auto bits = [](double v) { return std::bit_cast<std::uint64_t>(v); };
  CHECK(rpsim::test::same_bits(fast, slow));
  CHECK(rpsim::test::same_bits(fast_scales, slow_scales));
  CHECK(bits(fast_ts) == bits(slow_ts));
  CHECK((fast_stats.saturated == slow_stats.saturated && fast_stats.flushed == slow_stats.flushed &&
         fast_stats.entries == slow_stats.entries));
  CHECK(bits(fast_stats.scale_min) == bits(slow_stats.scale_min));
  CHECK(bits(fast_stats.scale_max) == bits(slow_stats.scale_max));
  CHECK((std::isnan(fast_stats.amax) ? std::isnan(slow_stats.amax) : fast_stats.amax == slow_stats.amax));
  return {fast, fast_stats};
}

}  // namespace

TEST_CASE("train: fp8.scale_rule, fp8.nvfp4_formula and fp8.pow2_scales in a policy object", "[train]") {
  CHECK(pol(R"({"name": "mxfp8", "fp8": {"scale_rule": "rceil"}})").fp8.scale_rule ==
        recipe::MxScaleRule::rceil);
  CHECK(pol(R"({"name": "nvfp4", "fp8": {"nvfp4_formula": "te-2026-02"}})").fp8.nvfp4_formula ==
        recipe::Nvfp4Formula::te_2026_02);
  CHECK_FALSE(pol(R"({"name": "fp8-blockwise", "fp8": {"pow2_scales": false}})").fp8.pow2_scales);
  CHECK_THROWS_WITH(pol(R"({"name": "nvfp4", "fp8": {"scale_rule": "rceil"}})"),
                    Catch::Contains("policy.fp8.scale_rule") && Catch::Contains("mx scaling only"));
  CHECK_THROWS_WITH(pol(R"({"name": "mxfp8", "fp8": {"scale_rule": "round"}})"),
                    Catch::Contains("floor, rceil, ceil, even"));
  CHECK_THROWS_WITH(pol(R"({"name": "mxfp8", "fp8": {"pow2_scales": true}})"), Catch::Contains("blockwise"));
  // meta.json names the options that are set.
  const auto j = pol(R"({"name": "mxfp8", "fp8": {"scale_rule": "even"}})").to_json();
  CHECK(j["fp8"]["scale_rule"] == "even");
  CHECK_FALSE(named_policy("mxfp8").to_json()["fp8"].contains("scale_rule"));
  // The rule reaches the quantiser: 480 is scale 1 under floor, 2 under rceil.
  Matrix x = Matrix::Constant(1, 32, 480.0);
  Matrix s1, s2;
  block_quantize_recipe(x, formats::e4m3(), named_policy("mxfp8").fp8, {1}, nullptr, nullptr, &s1);
  block_quantize_recipe(x, formats::e4m3(), pol(R"({"name": "mxfp8", "fp8": {"scale_rule": "rceil"}})").fp8,
                        {1}, nullptr, nullptr, &s2);
  CHECK(s1(0, 0) == 1.0);
  CHECK(s2(0, 0) == 2.0);
}

TEST_CASE("train: the fp8-blockwise row quantises as te-fp8-block, 1x128 and 128x128", "[train]") {
  const PrecisionPolicy p = named_policy("fp8-blockwise");
  CHECK(p.fp8.scaling == Fp8Scaling::blockwise);
  CHECK((p.fp8.block_size == 128 && p.fp8.weight_2d && p.fp8.pow2_scales));
  CHECK(p.rule("linear").compute->name == "e4m3");
  CHECK(p.rule("linear").backward_compute->name == "e4m3");
  const Matrix x = wide_matrix(130, 200, 4);
  for (const bool tiles : {false, true}) {
    const BlockOperand o = block_operand(x, formats::e4m3(), p.fp8, {1, tiles});
    // formats' te-fp8-block on the same binary32 matrix (row-major).
    std::vector<float> v(std::size_t(x.size()));
    for (Eigen::Index r = 0; r < x.rows(); ++r)
      for (Eigen::Index c = 0; c < x.cols(); ++c) v[std::size_t(r * x.cols() + c)] = float(x(r, c));
    const Quantized q = quantize(
        recipe_spec("te-fp8-block", {{"pow2", "true"}, {"tile", tiles ? "128x128" : "1x128"}}), v, 130, 200);
    const std::vector<double> d = dequantize(q);
    bool same = true;
    for (Eigen::Index r = 0; r < x.rows(); ++r)
      for (Eigen::Index c = 0; c < x.cols(); ++c) {
        const std::size_t i = std::size_t(r * x.cols() + c);
        const double scale =
            q.scales[(std::size_t(r) / (tiles ? 128 : 1)) * q.scale_cols + std::size_t(c) / 128];
        same = same && o.scales(r, c) == scale &&
               o.values(r, c) == double(recipe::element_value(q.spec.element, q.codes[i])) * scale;
        same = same && float(o.values(r, c)) == float(d[i]);  // the dequantised value, in binary32
      }
    INFO("tiles " << tiles);
    CHECK(same);
  }
}

TEST_CASE("train: fp8-blockwise GEMMs fold each 128-long k tile's product with its scales", "[train]") {
  const PrecisionPolicy p = named_policy("fp8-blockwise");
  const Matrix x = wide_matrix(6, 300, 5), w = wide_matrix(300, 5, 6);
  const BlockOperand a = block_operand(x, formats::e4m3(), p.fp8, {1}),
                     b = block_operand(w, formats::e4m3(), p.fp8, {0, true});
  const sim::AccumulationModel model = p.rule("linear").accumulation;
  const Matrix d = block_matmul(a, b, model, {});
  // The same fold written out: P_t over k in [128 t, 128 t + 128), then
  // y = fma(fl32(P_t * sa), sb, y) (A 1D, B 2D).
  for (Eigen::Index i = 0; i < 6; ++i)
    for (Eigen::Index j = 0; j < 5; ++j) {
      float y = 0.0f;
      for (Eigen::Index t = 0; t < 3; ++t) {
        const Eigen::Index k0 = 128 * t, len = std::min<Eigen::Index>(128, 300 - k0);
        float partial = 0.0f;
        for (Eigen::Index k = k0; k < k0 + len; ++k)
          partial += float(a.values(i, k) / a.scales(i, k)) * float(b.values(k, j) / b.scales(k, j));
        y = std::fma(partial * float(a.scales(i, k0)), float(b.scales(k0, j)), y);
      }
      CHECK(d(i, j) == double(y));
    }
}

TEST_CASE("train: fp8-blockwise trains a small MLP", "[train]") {
  nlohmann::json j = nlohmann::json::parse(R"({
    "name": "blockwise-mlp", "seed": 5, "policy": "fp8-blockwise",
    "model": {"type": "mlp", "hidden": [32]},
    "data": {"name": "synthetic", "synthetic_train_size": 256, "synthetic_test_size": 64},
    "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},
    "batch_size": 32, "steps": 6, "evaluate": false,
    "telemetry": {"histogram_steps": []}
  })");
  const RunResult r = run(parse_config(j), RunOptions{});
  CHECK(r.steps_csv.find("fc0.dy_fp8_scale_max") != std::string::npos);
  CHECK(std::isfinite(r.final_loss));
}

TEST_CASE("train: TE's Hadamard transform is orthogonal and is TE's x_mat @ H / 4 on a column", "[train]") {
  const Matrix t = te_hadamard_transform(16);
  CHECK((t.transpose() * t - Matrix::Identity(16, 16)).cwiseAbs().maxCoeff() == 0.0);
  std::vector<float> row(16);
  Matrix col(16, 1);
  for (int k = 0; k < 16; ++k) row[std::size_t(k)] = float(col(k, 0) = double(k * k % 7) - 3.0);
  const std::vector<float> te = te_hadamard_rows(row, 1, 16, te_wgrad_sign_vector());
  const Matrix ours = t * col;
  for (int k = 0; k < 16; ++k) CHECK(ours(k, 0) == double(te[std::size_t(k)]));
  CHECK_THROWS_WITH(te_hadamard_transform(32), Catch::Contains("16 entries"));
}

TEST_CASE("train: MX with FP8 elements to nearest, by lines, is the element-by-element quantiser's bits",
          "[train]") {
  // block_quantize_recipe's path for MX scales and E4M3 / E5M2 elements against
  // recipe::quantize_group_block entry by entry: values, scales and counts,
  // under each scale rule, along both axes, with a short last block and
  // entries of every kind (zeros of both signs, NaN, infinities, past the
  // element range, binary32 subnormals, values that are no binary32).
  const Matrix x = with_specials(
      9, {0.0, -0.0, std::nan(""), HUGE_VAL, -HUGE_VAL, 1e30, -3e-39, 1e-45, 1.0 + 1e-12, 465.0});
  for (const char* rule : {"floor", "rceil", "ceil", "even"})
    for (const char* element : {"e4m3", "e5m2"})
      for (const int axis : {0, 1}) {
        INFO(rule << " " << element << " axis " << axis);
        const PrecisionPolicy p =
            pol(fmt::format(R"({{"name": "mxfp8", "fp8": {{"scale_rule": "{}"}}}})", rule).c_str());
        as_elementwise(x, rpsim::format(element), p.fp8, {axis});
      }
}

TEST_CASE("train: stochastic rounding by lines is the element-by-element quantiser's bits", "[train]") {
  // block_quantize_recipe's line and tile paths with stochastic rounding (NVFP4's
  // gradients; MX with FP8 elements) against recipe::quantize_group_block entry
  // by entry: the same draw for each entry (group and counter), so the same
  // values, scales and counts, along both axes and in 16 x 16 tiles, with a
  // short last block, a short last tile and entries of every kind.
  Matrix x = with_specials(13, {0.0, -0.0, HUGE_VAL, -HUGE_VAL, 1e30, -3e-39, 1e-45, 1.0 + 1e-12, -0.2, 6.5});
  Matrix with_nan = x;
  with_nan(7, 7) = std::nan("");
  const RandomStream key{0x5eedull, 77};
  struct Case {
    const char* policy;
    const char* element;
  };
  for (const Case c : {Case{R"({"name": "nvfp4"})", "e2m1"}, Case{R"({"name": "mxfp8"})", "e4m3"},
                       Case{R"({"name": "mxfp8", "fp8": {"scale_rule": "rceil"}})", "e5m2"}})
    for (const Matrix* m : {&x, &with_nan})
      for (const BlockLayout layout :
           {BlockLayout{0, false, &key}, BlockLayout{1, false, &key}, BlockLayout{1, true, &key}}) {
        const bool nv = std::string(c.element) == "e2m1";
        if (layout.tiles && !nv) continue;  // (tiles: NVFP4's weights only)
        INFO(c.policy << " " << c.element << " axis " << layout.axis << (layout.tiles ? " tiles" : "")
                      << (m == &with_nan ? " with a NaN" : ""));
        const PrecisionPolicy p = pol(c.policy);
        const Format& f = rpsim::format(c.element);
        const Matrix fast = as_elementwise(*m, f, p.fp8, layout).first;
        // The draws matter: the same operand to nearest differs somewhere.
        if (m == &x) {
          const Matrix rn =
              block_quantize_recipe(*m, f, p.fp8, BlockLayout{layout.axis, layout.tiles}, nullptr);
          CHECK_FALSE(rpsim::test::same_bits(fast, rn));
        }
      }
}

TEST_CASE("train: NVFP4 to nearest, by lines, is the element-by-element quantiser's bits", "[train]") {
  // block_quantize_recipe's path for NVFP4 (TE's ladder on E2M1) against
  // recipe::quantize_group_block entry by entry: values, scales, counts and
  // the tensor scale, under both block-scale formulas, along both axes and in
  // 16 x 16 tiles (the weights'), with
  // a short last block and entries of every kind; and a tensor with a NaN
  // (every scale NaN).
  Matrix x = with_specials(11, {0.0, -0.0, HUGE_VAL, -HUGE_VAL, 1e30, -3e-39, 1e-45, 1.0 + 1e-12, -0.2, 6.5});
  Matrix with_nan = x;
  with_nan(7, 7) = std::nan("");
  for (const Matrix* m : {&x, &with_nan})
    for (const char* formula : {"te-2026-03", "te-2026-02"})
      for (const BlockLayout layout : {BlockLayout{0, false}, BlockLayout{1, false}, BlockLayout{1, true}}) {
        INFO(formula << " axis " << layout.axis << (layout.tiles ? " tiles" : "")
                     << (m == &with_nan ? " with a NaN" : ""));
        const PrecisionPolicy p =
            pol(fmt::format(R"({{"name": "nvfp4", "fp8": {{"nvfp4_formula": "{}"}}}})", formula).c_str());
        const auto [fast, fast_stats] = as_elementwise(*m, rpsim::format("e2m1"), p.fp8, layout);
        if (m == &x) CHECK(fast_stats.saturated + fast_stats.flushed > 0);  // the counts are exercised
        if (m == &with_nan) CHECK(std::isnan(fast(0, 0)));                  // NaN scales throughout
      }
}
