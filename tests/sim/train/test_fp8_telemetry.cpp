// FP8 telemetry in steps.csv: each per-tensor scale recomputed from the
// amaxes the same file reports (current: this step's; delayed: the history
// of earlier steps), and saturated / flushed counts on tensors built to
// saturate and flush, counted by hand.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <sstream>

#include "rpsim/config/config.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/train/layers.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/trainer.hpp"

using namespace rpsim;
using namespace rpsim::sim::config;
using namespace rpsim::sim::train;

namespace {

// A small MLP (fc0, fc1) on synthetic data under `policy` (a name or object).
RunResult run_fp8(const nlohmann::json& policy) {
  nlohmann::json j = nlohmann::json::parse(R"({
    "name": "fp8-telemetry", "seed": 5,
    "model": {"type": "mlp", "hidden": [16]},
    "data": {"name": "synthetic", "synthetic_train_size": 256, "synthetic_test_size": 64},
    "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},
    "batch_size": 32, "steps": 16, "evaluate": false,
    "telemetry": {"histogram_steps": []}
  })");
  j["policy"] = policy;
  return run(parse_config(j), RunOptions{});
}

// steps.csv as columns of numbers (every FP8 cell is a number).
struct Steps {
  std::vector<std::string> header;
  std::map<std::string, std::vector<double>> col;
};

Steps parse(const std::string& csv) {
  Steps s;
  std::istringstream in(csv);
  std::string line, cell;
  std::getline(in, line);
  std::istringstream h(line);
  while (std::getline(h, cell, ',')) s.header.push_back(cell);
  while (std::getline(in, line)) {
    std::istringstream row(line);
    for (const auto& name : s.header) {
      std::getline(row, cell, ',');
      if (name.find("_fp8_") != std::string::npos) s.col[name].push_back(std::stod(cell));
    }
  }
  return s;
}

const std::vector<std::string> kTensors = {"fc0.x", "fc0.w", "fc0.dy", "fc1.x", "fc1.w", "fc1.dy"};

// e4m3 forward, e5m2 for the gradient (Transformer Engine's HYBRID).
double max_finite(const std::string& tensor) {
  return tensor.ends_with(".dy") ? 57344.0 : 448.0;
}

// Transformer Engine's scale from the amax it uses, in binary32; 1 when
// that amax is zero or not finite.
double expected_scale(double max, double amax, int margin) {
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0;
  return double(float(max / amax / std::ldexp(1.0, margin)));
}

}  // namespace

TEST_CASE("train: FP8 telemetry columns come only with FP8 policies, in a fixed order", "[train]") {
  const Steps fp32 = parse(run_fp8("fp32").steps_csv);
  CHECK(fp32.col.empty());
  const Steps cur = parse(run_fp8("fp8-current").steps_csv);
  std::vector<std::string> expected;
  for (const auto& t : kTensors)
    for (const char* stat : {"amax", "scale", "saturated_fraction", "flushed_fraction"})
      expected.push_back(t + "_fp8_" + stat);
  // After every column an fp32 run has.
  REQUIRE(cur.header.size() == fp32.header.size() + expected.size());
  CHECK(std::equal(fp32.header.begin(), fp32.header.end(), cur.header.begin()));
  CHECK(std::equal(expected.begin(), expected.end(), cur.header.begin() + long(fp32.header.size())));
  const Steps mx = parse(run_fp8("fp8-mx").steps_csv);
  CHECK(mx.col.count("fc0.x_fp8_scale_min") == 1);
  CHECK(mx.col.count("fc0.x_fp8_scale_max") == 1);
  CHECK(mx.col.count("fc0.x_fp8_scale") == 0);
  for (double lo : mx.col.at("fc1.w_fp8_scale_min")) CHECK(lo > 0);
}

TEST_CASE("train: FP8 current scaling uses the same step's amax", "[train]") {
  nlohmann::json policy = {{"name", "fp8-current"}, {"fp8", {{"margin", 1}}}};
  const Steps s = parse(run_fp8(policy).steps_csv);
  for (const auto& t : kTensors) {
    const auto& amax = s.col.at(t + "_fp8_amax");
    const auto& scale = s.col.at(t + "_fp8_scale");
    REQUIRE(amax.size() == 16);
    for (std::size_t n = 0; n < amax.size(); ++n) {
      INFO(t << " step " << n << " amax " << amax[n]);
      CHECK(amax[n] > 0);
      CHECK(scale[n] == expected_scale(max_finite(t), amax[n], 1));
      // max_finite / amax / 2 cannot reach the format's range: nothing clamps.
      CHECK(s.col.at(t + "_fp8_saturated_fraction")[n] == 0);
    }
  }
}

TEST_CASE("train: FP8 delayed scaling uses the amax history of earlier steps", "[train]") {
  for (const char* algo : {"max", "most_recent"}) {
    const int len = 3;
    nlohmann::json policy = {{"name", "fp8-delayed"},
                             {"fp8", {{"amax_history_len", len}, {"amax_compute_algo", algo}}}};
    const Steps s = parse(run_fp8(policy).steps_csv);
    int differs_from_current = 0;
    for (const auto& t : kTensors) {
      const auto& amax = s.col.at(t + "_fp8_amax");
      const auto& scale = s.col.at(t + "_fp8_scale");
      REQUIRE(amax.size() == 16);
      for (std::size_t n = 0; n < amax.size(); ++n) {
        INFO(algo << " " << t << " step " << n);
        // Transformer Engine's first step: history zeros, scale 1.
        if (n == 0) {
          CHECK(scale[n] == 1.0);
          continue;
        }
        double used = amax[n - 1];
        if (std::string(algo) == "max")
          for (std::size_t k = n >= len ? n - len : 0; k < n; ++k) used = std::max(used, amax[k]);
        CHECK(scale[n] == expected_scale(max_finite(t), used, 0));
        differs_from_current += scale[n] != expected_scale(max_finite(t), amax[n], 0);
      }
    }
    // The weights and gradients move, so the history lags somewhere.
    CHECK(differs_from_current > 0);
  }
}

TEST_CASE("train: FP8 saturated and flushed fractions of a Linear layer's input, counted by hand",
          "[train]") {
  const PrecisionPolicy pol = named_policy("fp8-delayed");
  const StepContext ctx{&pol, 0, 0};
  Linear l("fc", 4, 2);
  l.weight.value = Matrix::Constant(4, 2, 0.25);
  REQUIRE(l.fp8_stats(pol).size() == 3);
  CHECK(l.fp8_stats(named_policy("fp32")).empty());
  // Step 0 quantises with Transformer Engine's initial scale 1; its amax 1
  // goes into the history, so the next scale is 448 / 1.
  l.forward(Tensor{Matrix::Constant(2, 4, 1.0), &formats::binary32()}, ctx);
  CHECK(l.fp8_stats(pol)[0].second->scale_min == 1.0);
  // Step 1 quantises with that scale: 2 * 448 and 1.5 * 448 pass e4m3's 448
  // and clamp; 1e-6 * 448 is below half of e4m3's least subnormal 2^-9 and
  // flushes; 2^-10 / 448 * 448 = 2^-10 is that half exactly, a tie to even
  // zero, and flushes; 0 does not count as flushed.
  Matrix x(2, 4);
  x << 2.0, 1.5, 1e-6, 0.0, std::ldexp(1.0, -10) / 448.0, 0.5, -1.0, 0.25;
  l.forward(Tensor{x, &formats::binary32()}, ctx);
  const auto stats = l.fp8_stats(pol);
  REQUIRE(stats[0].first == "x");
  const Fp8Stats& s = *stats[0].second;
  CHECK(s.amax == 2.0);
  CHECK(s.scale_min == 448.0);
  CHECK(s.entries == 8);
  CHECK(s.saturated == 2);
  CHECK(s.flushed == 2);
  // The weight: 0.25 * its own scale (1792) is 448 exactly, no clamping.
  CHECK(stats[1].second->saturated == 0);
  CHECK(stats[1].second->flushed == 0);
}

TEST_CASE("train: FP8 helper statistics: per-tensor and MX counts by hand", "[train]") {
  const Format& e4m3 = formats::e4m3();
  Matrix x(1, 9);
  // Scale 1: 1000, -500 and 460 clamp to +-448 (448 itself does not);
  // 1e-4 and 2^-10 (a tie to zero) flush, 2^-9 is e4m3's least subnormal.
  x << 1000.0, -500.0, 448.0, 460.0, 1e-4, 0.0, std::ldexp(1.0, -9), std::ldexp(1.0, -10), 3.0;
  Fp8Stats s;
  fp8_quantize(x, e4m3, 1.0, &s);
  CHECK(s.entries == 9);
  CHECK(s.saturated == 3);
  CHECK(s.flushed == 2);

  // MX, one block of 32 along the row: amax 120, X = 2^(6 - 8), scale 4.
  // 120 * 4 = 480 clamps to 448; 1e-9 * 4 flushes.
  Matrix m(1, 5);
  m << 1.0, 0.3, -100.0, 1e-9, 120.0;
  Fp8Stats b;
  Fp8Recipe mx;
  mx.scaling = Fp8Scaling::mx;
  mx.block_size = 32;
  block_quantize_recipe(m, e4m3, mx, {1}, &b);
  CHECK(b.amax == 120.0);
  CHECK(b.scale_min == 4.0);
  CHECK(b.scale_max == 4.0);
  CHECK(b.entries == 5);
  CHECK(b.saturated == 1);
  CHECK(b.flushed == 1);
  // The same tensor down its columns (blocks of one) adds to the record:
  // each entry gets 2^(8 - floor(log2 |v|)); 120 clamps again, 1e-9 now
  // fits (scale 2^38).
  block_quantize_recipe(m, e4m3, mx, {0}, &b);
  CHECK(b.entries == 10);
  CHECK(b.saturated == 2);
  CHECK(b.flushed == 1);
  CHECK(b.scale_min == 4.0);
  CHECK(b.scale_max == std::ldexp(1.0, 38));
}
