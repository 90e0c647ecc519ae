// The block-scaled policy rows (mxfp8, mxfp6, mxfp4, nvfp4): what each row
// sets, the quantisation of a GEMM's inputs against formats' mx_quantize and
// nvfp4_quantize on the same tensor, 2D weight tiles, the random Hadamard
// transform, and stochastic rounding keyed by (seed, stream).
#include <catch2/catch.hpp>
#include <cmath>
#include <span>

#include "finite_differences.hpp"
#include "rpsim/config/config.hpp"
#include "rpsim/config/policy_json.hpp"
#include "rpsim/formats/block_scale.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/layers.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/policy.hpp"
#include "rpsim/train/trainer.hpp"

using namespace rpsim;
using namespace rpsim::sim::config;
using namespace rpsim::sim::train;
using namespace rpsim::sim::train::testing;

namespace {

Fp8Recipe recipe_of(const std::string& policy) {
  return named_policy(policy).fp8;
}

// formats' quantiser on one line of values: element times block scale (the
// tensor scale left to the GEMM's epilogue).
std::vector<double> blocks_of(const BlockQuantized& q) {
  std::vector<double> out;
  for (std::size_t i = 0; i < q.elements.size(); ++i) out.push_back(q.elements[i] * q.scales[i / q.block]);
  return out;
}
std::vector<double> reference(const Fp8Recipe& r, const Format& f, const std::vector<double>& v,
                              double amax) {
  const auto b = static_cast<std::size_t>(r.block_size);
  return blocks_of(r.scaling == Fp8Scaling::nvfp4 ? nvfp4_quantize(v, b, amax) : mx_quantize(f, v, b));
}

double amax_of(const Matrix& m) {
  return m.cwiseAbs().maxCoeff();
}

}  // namespace

TEST_CASE("train: the block-scaled policy rows", "[train]") {
  const PrecisionPolicy mx8 = named_policy("mxfp8"), old = named_policy("fp8-mx");
  CHECK(mx8.fp8.scaling == Fp8Scaling::mx);
  CHECK(mx8.fp8.block_size == 32);
  CHECK(mx8.rule("linear").compute->name == old.rule("linear").compute->name);
  CHECK(mx8.rule("linear").backward_compute->name == "e5m2");
  CHECK(named_policy("mxfp6").rule("linear").compute->name == "e3m2");
  CHECK(named_policy("mxfp6").rule("linear").backward_compute->name == "e3m2");
  CHECK(named_policy("mxfp4").rule("linear").backward_compute->name == "e2m1");
  const PrecisionPolicy nv = named_policy("nvfp4");
  CHECK(nv.fp8.scaling == Fp8Scaling::nvfp4);
  CHECK(nv.fp8.block_size == 16);
  CHECK(nv.fp8.weight_2d);
  CHECK(nv.fp8.hadamard == 16);
  CHECK(nv.fp8.gradient_sr);
  CHECK(nv.fp8.high_precision_last == 1);
  CHECK(nv.rule("linear").scaled_inputs);
  CHECK_FALSE(nv.rule("lm_head").scaled_inputs);  // the tied output projection stays in binary32
  CHECK(nv.to_json()["fp8"]["scaling"] == "nvfp4");
  // fp8-mx's meta.json keys are unchanged by the new recipe fields.
  CHECK_FALSE(old.to_json()["fp8"].contains("hadamard"));
}

TEST_CASE("train: block_quantize_recipe equals formats' MX and NVFP4 quantisers line by line", "[train]") {
  const Matrix x = random_matrix(6, 48, 21, 3.0);
  for (const char* policy : {"mxfp8", "mxfp6", "mxfp4", "nvfp4"}) {
    const Fp8Recipe r = recipe_of(policy);
    const Format& f = *named_policy(policy).rule("linear").compute;
    for (int axis : {0, 1}) {
      INFO(policy << " axis " << axis);
      double s_enc = 0;
      const Matrix q = block_quantize_recipe(x, f, r, {axis}, nullptr, &s_enc);
      // NVFP4's tensor scale 6 * 448 / amax in binary32; MX has none.
      CHECK(s_enc == (r.scaling == Fp8Scaling::nvfp4 ? double(float(6 * 448 / amax_of(x))) : 1.0));
      const Eigen::Index lines = axis == 1 ? x.rows() : x.cols();
      for (Eigen::Index i = 0; i < lines; ++i) {
        const Matrix line = axis == 1 ? Matrix(x.row(i)) : Matrix(x.col(i));
        const std::vector<double> v(line.data(), line.data() + line.size());
        const Matrix got = axis == 1 ? Matrix(q.row(i)) : Matrix(q.col(i));
        const std::vector<double> want = reference(r, f, v, amax_of(x));
        for (std::size_t k = 0; k < want.size(); ++k) REQUIRE(got.data()[k] == want[k]);
      }
    }
  }
}

TEST_CASE("train: NVFP4 weights in 16x16 tiles share one scale and quantise W and W^T alike", "[train]") {
  const Fp8Recipe r = recipe_of("nvfp4");
  const Format& e2m1 = parse_format("e2m1");
  Matrix w = random_matrix(32, 48, 22);
  w(3, 40) = 9.0;  // one outlier: only its tile's scale grows
  const Matrix q = block_quantize_recipe(w, e2m1, r, {0, true});
  CHECK(Matrix(block_quantize_recipe(w.transpose(), e2m1, r, {0, true}).transpose()) == q);
  for (Eigen::Index ti = 0; ti < 2; ++ti)
    for (Eigen::Index tj = 0; tj < 3; ++tj) {
      const Matrix tile = w.block(16 * ti, 16 * tj, 16, 16);
      std::vector<double> v;
      for (Eigen::Index a = 0; a < 16; ++a)
        for (Eigen::Index b = 0; b < 16; ++b) v.push_back(tile(a, b));
      const std::vector<double> want = blocks_of(nvfp4_quantize(v, 256, amax_of(w)));
      for (Eigen::Index a = 0; a < 16; ++a)
        for (Eigen::Index b = 0; b < 16; ++b) REQUIRE(q(16 * ti + a, 16 * tj + b) == want[16 * a + b]);
    }
  // 1D blocks down K differ from the tiles (the outlier's column only).
  CHECK(block_quantize_recipe(w, e2m1, r, {0}) != q);
}

TEST_CASE("train: the random Hadamard transform is orthogonal and keeps A^T B", "[train]") {
  const Matrix t = named_policy("nvfp4").fp8.hadamard == 16 ? hadamard_transform(16, 7) : Matrix();
  REQUIRE(t.rows() == 16);
  CHECK((t * t.transpose() - Matrix::Identity(16, 16)).cwiseAbs().maxCoeff() == 0.0);  // exact: +-1/16 terms
  CHECK(t.cwiseAbs().minCoeff() == 0.25);
  CHECK(hadamard_transform(16, 7) == t);
  CHECK(hadamard_transform(16, 8) != t);  // another seed, other signs
  CHECK_THROWS_AS(hadamard_transform(12, 7), std::invalid_argument);
  // Both operands rotated along K (40 rows: two chunks of 16 and a tail of 8).
  const Matrix a = random_matrix(40, 5, 23), b = random_matrix(40, 3, 24);
  const Matrix ra = hadamard_rows(a, t), rb = hadamard_rows(b, t);
  CHECK(ra.bottomRows(8) ==
        rounded(formats::binary32(), Matrix(a.bottomRows(8)), RoundingMode::nearest_even));
  CHECK(ra.topRows(16) != a.topRows(16));
  const Matrix exact = a.transpose() * b, rotated = ra.transpose() * rb;
  CHECK((exact - rotated).cwiseAbs().maxCoeff() < 1e-5 * exact.cwiseAbs().maxCoeff());
}

TEST_CASE("train: NVFP4 gradients round stochastically keyed by seed and stream", "[train]") {
  const Fp8Recipe r = recipe_of("nvfp4");
  const Format& e2m1 = parse_format("e2m1");
  // amax 6: tensor and block scales cancel (448 each), so 5 lies halfway
  // between e2m1's 4 and 6.
  Matrix dy = Matrix::Constant(4, 16, 5.0);
  dy.col(0).setConstant(6.0);
  const RandomStream s1{3, 11}, s2{3, 12};
  const Matrix a = block_quantize_recipe(dy, e2m1, r, {1, false, &s1});
  CHECK(block_quantize_recipe(dy, e2m1, r, {1, false, &s1}) == a);  // same key, same bits
  CHECK(block_quantize_recipe(dy, e2m1, r, {1, false, &s2}) != a);
  // Round to nearest even: 5 goes to 4 (e2m1 1.0 x 2^2; 6 is 1.1 x 2^2).
  Matrix rne = Matrix::Constant(4, 16, 4.0);
  rne.col(0).setConstant(6.0);
  double s_enc = 0;
  // The tensor scale 448 = 6 * 448 / 6 is left to the GEMM's epilogue.
  CHECK(block_quantize_recipe(dy, e2m1, r, {1}, nullptr, &s_enc) == rne * 448.0);
  CHECK(s_enc == 448.0);
  // Unbiased: the mean over many keys approaches 5 (RNE gives 4, ties to even).
  double sum = 0;
  int n = 0;
  for (std::uint64_t k = 0; k < 400; ++k) {
    const RandomStream s{9, k};
    const Matrix q = block_quantize_recipe(dy, e2m1, r, {1, false, &s});
    sum += q.rightCols(15).sum() / 448.0;
    n += 4 * 15;
  }
  CHECK(sum / n == Approx(5.0).margin(0.02));
}

TEST_CASE("train: block-scaled recipe keys in a policy object", "[train]") {
  const auto pol = [](const char* text) { return policy_from_json(nlohmann::json::parse(text), "policy"); };
  const PrecisionPolicy p =
      pol(R"({"name": "mxfp4", "fp8": {"weight_2d": true, "hadamard": 16, "gradient_sr": true}})");
  CHECK(p.fp8.weight_2d);
  CHECK(p.fp8.hadamard == 16);
  CHECK(p.fp8.gradient_sr);
  CHECK_THROWS_WITH(pol(R"({"name": "nvfp4", "fp8": {"hadamard": 12}})"),
                    Catch::Contains("policy.fp8.hadamard") && Catch::Contains("power of two"));
  CHECK_THROWS_WITH(pol(R"({"name": "fp8", "fp8": {"scaling": "nvfp8"}})"), Catch::Contains("nvfp4"));
}

TEST_CASE("train: nvfp4 trains a small MLP with its last linear in bfloat16", "[train]") {
  nlohmann::json j = nlohmann::json::parse(R"({
    "name": "nvfp4-mlp", "seed": 5, "policy": "nvfp4",
    "model": {"type": "mlp", "hidden": [32]},
    "data": {"name": "synthetic", "synthetic_train_size": 256, "synthetic_test_size": 64},
    "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},
    "batch_size": 32, "steps": 8, "evaluate": false,
    "telemetry": {"histogram_steps": []}
  })");
  const RunResult r = run(parse_config(j), RunOptions{});
  // fc0 is block-scaled (its FP8 columns are there); fc1, the last linear, is not.
  const std::string header = r.steps_csv.substr(0, r.steps_csv.find('\n'));
  CHECK(header.find("fc0.dy_fp8_scale_max") != std::string::npos);
  CHECK(header.find("fc1.x_fp8") == std::string::npos);
  CHECK(std::isfinite(r.final_loss));
}
