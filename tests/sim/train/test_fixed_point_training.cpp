// Fixed point in the training simulator: a policy puts q16.14 (any spec) in
// weights, activations, gradients and updates; "rounding": "sr" rounds every
// tensor of the forward and backward passes stochastically; and the Gupta et
// al. 2015 mechanism itself: an update below half a step is lost to round to
// nearest and kept on average by stochastic rounding.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "rpsim/config/config.hpp"
#include "rpsim/config/policy_json.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/optimizer.hpp"
#include "rpsim/train/policy.hpp"
#include "rpsim/train/trainer.hpp"

using namespace rpsim;
using namespace rpsim::sim::config;
using namespace rpsim::sim::train;

namespace {

// Gupta et al.'s <IL, FL> = <2, 14> for weights, activations, gradients and
// updates; exact accumulation (eigen:binary64 sums these products exactly).
nlohmann::json q16_14_policy(const char* rounding) {
  return {{"name", "fp32"},
          {"weights", "q16.14"},
          {"gradients", "q16.14"},
          {"rounding", rounding},
          {"update_rounding", rounding},
          {"ops",
           {{"linear", {{"compute", "q16.14"}, {"output", "q16.14"}, {"accumulation", "eigen:binary64"}}},
            {"relu", {{"compute", "q16.14"}, {"output", "q16.14"}}}}}};
}

bool on_q16_14_grid(const Matrix& m) {
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double k = m.data()[i] * 16384;
    if (k != std::floor(k) || k < -32768 || k > 32767) return false;
  }
  return true;
}

RunResult run_json(const nlohmann::json& j, int threads) {
  RunOptions o;
  o.threads = threads;
  return run(parse_config(j), o);
}

}  // namespace

TEST_CASE("train: a policy takes fixed-point formats and a rounding for every tensor", "[train]") {
  const PrecisionPolicy p = policy_from_json(q16_14_policy("sr"), "policy");
  CHECK(p.weights->is_fixed_point());
  CHECK(p.parameter_storage() == parse_format("q16.14"));
  CHECK(p.rule("linear").output->frac_bits == 14);
  CHECK(p.rounding == RoundingMode::stochastic);
  CHECK(p.update_rounding == RoundingMode::stochastic);
  CHECK(p.to_json()["rounding"] == "sr");
  CHECK(p.to_json()["weights"] == "q16.14");
  CHECK(named_policy("bf16-pure").rounding == RoundingMode::nearest_even);
  nlohmann::json bad = q16_14_policy("rtz");
  try {
    (void)policy_from_json(bad, "policy");
    FAIL("accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("policy.rounding") != std::string::npos);
  }
  bad = q16_14_policy("sr");
  bad["weights"] = "q1.0";
  try {
    (void)policy_from_json(bad, "policy");
    FAIL("accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("policy.weights") != std::string::npos);
    CHECK(std::string(e.what()).find("word length 1") != std::string::npos);
  }
}

TEST_CASE("train: an update below half a fixed-point step: lost to nearest, kept on average by SR",
          "[train]") {
  nlohmann::json j = q16_14_policy("rne");
  const PrecisionPolicy rne = policy_from_json(j, "policy");
  j["update_rounding"] = "sr";
  const PrecisionPolicy sr = policy_from_json(j, "policy");
  // lr * g = 2^-17, an eighth of q16.14's step 2^-14, on 4096 weights at 0.5.
  const OptimizerConfig sgd{"sgd", 0.125, 0.0, 0.0, false, {0.9, 0.999}, 1e-8};
  for (const PrecisionPolicy* p : {&rne, &sr}) {
    Parameter w{"w", Matrix::Constant(64, 64, 0.5), Matrix::Constant(64, 64, -0x1p-14), 0};
    Optimizer opt(sgd, *p, 1);
    const int steps = 64;
    std::int64_t stalled = 0;
    for (int s = 0; s < steps; ++s) {
      opt.step({&w});
      stalled += w.update_stalled;
    }
    CHECK(on_q16_14_grid(w.value));
    const double moved = w.value.mean() - 0.5;
    if (p == &rne) {
      CHECK(moved == 0.0);                                     // every update rounded away: training stalls
      CHECK(stalled == std::int64_t(steps) * w.value.size());  // and each was counted as stalled
    } else {
      // SR keeps a weight still with probability 7/8: 6 sigma of 64 * 4096 draws.
      const double n = double(steps) * double(w.value.size());
      CHECK(std::fabs(double(stalled) - 0.875 * n) < 6 * std::sqrt(n * 0.875 * 0.125));
      // Each step moves a weight up one step with probability 1/8: the mean
      // is 8 steps of 2^-14 after 64 steps; 6 sigma of the mean of 4096.
      const double step = 0x1p-14, expected = steps * 0x1p-17;
      const double sigma = step * std::sqrt(steps * 0.125 * 0.875 / 4096.0);
      CHECK(std::fabs(moved - expected) < 6 * sigma);
    }
  }
}

TEST_CASE("train: stochastic tensor rounding draws fresh bits per call and ends with its scope", "[train]") {
  const Format& q = parse_format("q16.14");
  const Matrix x = Matrix::Constant(32, 32, 0x1.4p-16);  // 0.3125 of a step
  Matrix a = x, b = x, c = x;
  {
    const ScopedTensorRounding sr(RoundingMode::stochastic, RandomStream{5, 1});
    round_in_place(q, a);
    round_in_place(q, b);
    {
      const ScopedTensorRounding inner(RoundingMode::nearest_even, RandomStream{});
      round_in_place(q, c);
    }
    CHECK(on_q16_14_grid(a));
    CHECK(a != b);  // two calls, two streams
    // Unbiased: 1024 draws of probability 0.3125, mean within 6 sigma.
    const double sigma = 0x1p-14 * std::sqrt(0.3125 * 0.6875 / 1024);
    CHECK(std::fabs(a.mean() - 0x1.4p-16) < 6 * sigma);
  }
  CHECK(c.isZero());  // the inner nearest scope: every entry to 0
  Matrix d = x;
  round_in_place(q, d);  // outside every scope: nearest
  CHECK(d.isZero());
}

TEST_CASE("train: 16-bit fixed point trains end to end, deterministically, weights on the grid", "[train]") {
  nlohmann::json j = nlohmann::json::parse(R"({
    "name": "fixed", "seed": 3, "policy": "fp32",
    "model": {"type": "mlp", "hidden": [16]},
    "data": {"name": "synthetic", "synthetic_train_size": 256, "synthetic_test_size": 64},
    "optimizer": {"type": "sgd", "lr": 0.1},
    "batch_size": 64, "steps": 12, "shadow": true,
    "telemetry": {"histogram_steps": []}
  })");
  j["policy"] = q16_14_policy("sr");
  const int saved = omp_get_max_threads();
  const RunResult a = run_json(j, 1), b = run_json(j, 2);
  omp_set_num_threads(saved);
  CHECK(a.steps_csv == b.steps_csv);
  CHECK(a.meta["policy"]["weights"] == "q16.14");
  CHECK(a.meta["policy"]["ops"]["linear"]["output"] == "q16.14");
  j["policy"] = q16_14_policy("rne");
  const RunResult nearest = run_json(j, 0);
  CHECK(nearest.steps_csv != a.steps_csv);
  CHECK(nearest.final_loss < 5);
  CHECK(a.final_loss < 5);
}
