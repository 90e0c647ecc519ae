// Small synthetic training runs: loss scaling and underflow, skipped steps,
// determinism, and the fp32 policy against its FP64 shadow.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include "csv_column.hpp"
#include "rpsim/config/config.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/trainer.hpp"

using namespace rpsim;
using namespace rpsim::sim::config;
using namespace rpsim::sim::train;
using rpsim::sim::train::testing::column;

namespace {

nlohmann::json small_config(const std::string& policy) {
  return nlohmann::json::parse(R"({
    "name": "test", "seed": 3, "policy": ")" +
                               policy + R"(",
    "model": {"type": "mlp", "hidden": [16]},
    "data": {"name": "synthetic", "synthetic_train_size": 256, "synthetic_test_size": 64},
    "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},
    "batch_size": 64, "steps": 12,
    "telemetry": {"histogram_steps": [0, 11]}
  })");
}

RunResult run_json(const nlohmann::json& j, int threads = 0) {
  RunOptions o;
  o.threads = threads;
  return run(parse_config(j), o);
}

double column_sum(const std::string& csv, const std::string& name) {
  double s = 0;
  for (const auto& v : column(csv, name)) s += std::stod(v);
  return s;
}

}  // namespace

TEST_CASE("train: fp32 policy tracks its FP64 shadow", "[train]") {
  const RunResult r = run_json(small_config("fp32"));
  REQUIRE(r.steps_done == 12);
  const auto loss = column(r.steps_csv, "loss_emulated_nats");
  const auto shadow = column(r.steps_csv, "loss_fp64_nats");
  for (std::size_t i = 0; i < loss.size(); ++i)
    CHECK(std::stod(loss[i]) == Approx(std::stod(shadow[i])).epsilon(1e-5));
  for (const auto& d : column(r.steps_csv, "fc0_weight_rel_distance_from_fp64")) CHECK(std::stod(d) < 1e-5);
  CHECK(std::stod(loss.back()) < std::stod(loss.front()));  // it learns
  CHECK(column_sum(r.steps_csv, "fc0_weight_grad_underflow_fraction") == 0.0);
  // lr 0.1 with momentum: binary32 keeps (almost) every update.
  for (const auto& v : column(r.steps_csv, "fc1_weight_update_stalled_fraction")) CHECK(std::stod(v) < 0.01);
  REQUIRE(r.evaluations.size() == 1);
  CHECK(r.evaluations[0].test_accuracy_percent ==
        Approx(r.evaluations[0].shadow_test_accuracy_percent).margin(2));
}

TEST_CASE("train: fp16-amp gradient underflow shrinks with loss scaling", "[train]") {
  auto j = small_config("fp16-amp");
  j["steps"] = 24;
  j["optimizer"]["lr"] = 0.5;  // confident predictions: tiny gradients
  j["loss_scaler"] = {{"policy", "static"}, {"init_scale", 1}};
  const RunResult unscaled = run_json(j);
  j["loss_scaler"]["init_scale"] = 1024;
  const RunResult scaled = run_json(j);
  double u1 = 0, u1024 = 0;
  for (const char* layer : {"fc0", "fc1"}) {
    u1 += column_sum(unscaled.steps_csv, std::string(layer) + "_weight_grad_underflow_fraction") +
          column_sum(unscaled.steps_csv, std::string(layer) + "_activation_grad_underflow_fraction");
    u1024 += column_sum(scaled.steps_csv, std::string(layer) + "_weight_grad_underflow_fraction") +
             column_sum(scaled.steps_csv, std::string(layer) + "_activation_grad_underflow_fraction");
  }
  INFO("underflow fraction sums: scale 1 " << u1 << ", scale 1024 " << u1024);
  CHECK(u1 > 0);
  CHECK(u1024 < u1);
  CHECK(column(scaled.steps_csv, "loss_scale").front() == "1024");
}

TEST_CASE("train: underflow columns need no shadow, the shadow comparison is its own column", "[train]") {
  auto j = small_config("fp16-amp");
  j["loss_scaler"] = {{"policy", "static"}, {"init_scale", 1}};
  j["optimizer"]["lr"] = 0.5;
  const RunResult with = run_json(j);
  j["shadow"] = false;
  const RunResult without = run_json(j);
  for (const char* c : {"fc0_weight_grad_underflow_fraction", "fc1_activation_grad_underflow_fraction"})
    CHECK(column(with.steps_csv, c) == column(without.steps_csv, c));
  CHECK(column_sum(with.steps_csv, "fc1_activation_grad_underflow_fraction") > 0);
  for (const auto& v : column(without.steps_csv, "fc1_activation_grad_zero_vs_fp64_fraction"))
    CHECK(v.empty());
  // Against the shadow, the emulated run also has zeros that are not
  // underflow (ReLU masks that differ once the runs diverge): never fewer.
  const auto under = column(with.steps_csv, "fc0_activation_grad_underflow_fraction");
  const auto vs = column(with.steps_csv, "fc0_activation_grad_zero_vs_fp64_fraction");
  double su = 0, sv = 0;
  for (std::size_t i = 0; i < under.size(); ++i) su += std::stod(under[i]), sv += std::stod(vs[i]);
  INFO("underflow " << su << ", zero vs fp64 " << sv);
  CHECK(sv >= su);
}

TEST_CASE("train: updates far below the weights' spacing are counted as stalled, SR moves some", "[train]") {
  auto j = small_config("bf16-pure");
  j["optimizer"] = {{"type", "sgd"}, {"lr", 1e-6}};  // lr * g far below bf16's spacing 2^-8 |w|
  const RunResult nearest = run_json(j);
  j["policy"] = {{"name", "bf16-pure"}, {"update_rounding", "sr"}};
  const RunResult sr = run_json(j);
  const double n = double(column(nearest.steps_csv, "step").size());
  const double rne_mean = column_sum(nearest.steps_csv, "fc1_weight_update_stalled_fraction") / n;
  const double sr_mean = column_sum(sr.steps_csv, "fc1_weight_update_stalled_fraction") / n;
  INFO("stalled fraction of fc1's entries: nearest " << rne_mean << ", stochastic " << sr_mean);
  CHECK(rne_mean > 0.9);  // the output layer's gradients are dense: nearly every entry
  CHECK(sr_mean < rne_mean);
  CHECK(sr_mean > 0.5);  // a move has probability lr |g| / spacing, small
}

TEST_CASE("train: an injected overflow skips the step and backs off the scale", "[train]") {
  auto j = small_config("fp16-amp");
  j["inject_overflow_steps"] = {3};
  j["loss_scaler"] = {{"policy", "pytorch"}, {"init_scale", 256}};
  const RunResult r = run_json(j);
  const auto skipped = column(r.steps_csv, "skipped");
  const auto found = column(r.steps_csv, "overflow_found");
  const auto scale = column(r.steps_csv, "loss_scale");
  CHECK(r.skipped_steps == 1);
  CHECK(skipped[3] == "1");
  CHECK(found[3] == "1");
  CHECK(skipped[2] == "0");
  CHECK(scale[3] == "256");
  CHECK(scale[4] == "128");
  CHECK(column(r.steps_csv, "fc0_weight_update_stalled_fraction")[3] == "0");  // nothing was updated
  // No scaler: the inf goes into the weights (no skipping).
  j["loss_scaler"] = {{"policy", "none"}};
  const RunResult none = run_json(j);
  CHECK(none.skipped_steps == 0);
  CHECK(column(none.steps_csv, "overflow_found")[3] == "1");
}

TEST_CASE("train: runs are byte-identical on rerun and across thread counts", "[train]") {
  for (const char* policy : {"fp16-amp", "bf16-pure"}) {
    auto j = small_config(policy);
    if (std::string(policy) == "bf16-pure") j["policy"] = {{"name", "bf16-pure"}, {"update_rounding", "sr"}};
    const int saved = omp_get_max_threads();
    const RunResult a = run_json(j, 1);
    const RunResult b = run_json(j, 1);
    const RunResult c = run_json(j, 2);
    omp_set_num_threads(saved);
    INFO(policy);
    CHECK(a.steps_csv == b.steps_csv);
    CHECK(a.histograms_csv == b.histograms_csv);
    CHECK(a.steps_csv == c.steps_csv);
    CHECK(a.histograms_csv == c.histograms_csv);
    CHECK(a.histograms_csv.find("0,fc0,activation_grad,emulated,") != std::string::npos);
  }
}

TEST_CASE("train: low-precision policies run and learn", "[train]") {
  for (const char* policy : {"bf16-amp", "bf16-kahan", "fp8-delayed", "fp8-current", "fp8-mx"}) {
    const RunResult r = run_json(small_config(policy));
    const auto loss = column(r.steps_csv, "loss_emulated_nats");
    INFO(policy);
    CHECK(std::stod(loss.back()) < std::stod(loss.front()));
    CHECK(column_sum(r.steps_csv, "fc0_weight_grad_nonfinite_fraction") == 0.0);
    CHECK(r.memory.weights > 0);
  }
  // Stochastic rounding of bf16 updates gives a different trajectory from nearest.
  auto j = small_config("bf16-pure");
  const RunResult nearest = run_json(j);
  j["policy"] = {{"name", "bf16-pure"}, {"update_rounding", "sr"}};
  const RunResult stochastic = run_json(j);
  CHECK(nearest.steps_csv != stochastic.steps_csv);
}

TEST_CASE("train: linear layers accumulate under Tensor Core and fp16 models end to end", "[train]") {
  auto j = small_config("fp16-amp");
  const RunResult fp32 = run_json(j);
  const auto fp32_loss = column(fp32.steps_csv, "loss_emulated_nats");
  for (const char* spec : {"tc:h100:fp16:fp32", "sequential:fp16"}) {
    j["policy"] = {{"name", "fp16-amp"}, {"accumulation", spec}};
    const int saved = omp_get_max_threads();
    const RunResult r = run_json(j, 1);
    const RunResult r2 = run_json(j, 2);
    omp_set_num_threads(saved);
    INFO(spec);
    REQUIRE(r.steps_done == 12);
    CHECK(r.steps_csv == r2.steps_csv);  // deterministic for any thread count
    CHECK(r.meta["policy"]["ops"]["linear"]["accumulation"] == sim::AccumulationModel::parse(spec).spec());
    const auto loss = column(r.steps_csv, "loss_emulated_nats");
    REQUIRE(loss.size() == fp32_loss.size());
    int differing = 0;
    for (std::size_t i = 0; i < loss.size(); ++i) {
      CHECK(std::isfinite(std::stod(loss[i])));
      differing += loss[i] != fp32_loss[i];
    }
    CHECK(differing > 0);                                     // the accumulation model changes the losses
    CHECK(std::stod(loss.back()) < std::stod(loss.front()));  // and it still learns
    // The FP64 shadow is the same in every run.
    CHECK(column(r.steps_csv, "loss_fp64_nats") == column(fp32.steps_csv, "loss_fp64_nats"));
  }
}

TEST_CASE("train: a CNN with LayerNorm-free conv stack trains under fp16-amp", "[train]") {
  auto j = small_config("fp16-amp");
  j["model"] = {{"type", "cnn"}, {"channels", {4}}};
  j["steps"] = 6;
  const RunResult r = run_json(j);
  CHECK(r.steps_done == 6);
  const auto loss = column(r.steps_csv, "loss_emulated_nats");
  CHECK(std::stod(loss.back()) < std::stod(loss.front()));
  auto k = small_config("fp32");
  k["model"] = {{"type", "mlp"}, {"hidden", {16}}, {"layer_norm", true}, {"activation", "gelu"}};
  const RunResult ln = run_json(k);
  CHECK(std::stod(column(ln.steps_csv, "loss_emulated_nats").back()) <
        std::stod(column(ln.steps_csv, "loss_emulated_nats").front()));
}

TEST_CASE("train: config errors name the key", "[train]") {
  auto expect_error = [](nlohmann::json j, const std::string& text) {
    try {
      parse_config(j);
      FAIL("no error for " << j.dump());
    } catch (const ConfigError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(text) != std::string::npos);
    }
  };
  auto j = small_config("fp32");
  j["optimizer"]["lr"] = "x";
  expect_error(j, "optimizer.lr: expected a number, got \"x\"");
  j = small_config("fp32");
  j["optimizer"]["lr"] = -1;
  expect_error(j, "optimizer.lr");
  j = small_config("fp32");
  j["batch_size"] = 0;
  expect_error(j, "batch_size");
  j = small_config("fp32");
  j["bogus"] = 1;
  expect_error(j, "bogus: unknown key");
  j = small_config("fp17");
  expect_error(j, "policy: unknown policy \"fp17\"");
  j = small_config("fp32");
  j["policy"] = {{"name", "bf16-amp"}, {"gradients", "fp12"}};
  expect_error(j, "policy.gradients: unknown format");
  j = small_config("fp32");
  apply_override(j, "optimizer.momentum=0.5");
  CHECK(parse_config(j).optimizer.momentum == 0.5);
}
