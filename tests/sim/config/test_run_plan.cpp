// The run plan reads the model's facts from its row of the model table
// (model_size, describe): it builds no network, its numbers are those of the
// network the trainer builds, and a `rpsim train` (plan, then run) builds the
// model once.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "rpsim/config/config.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/config/run_plan.hpp"
#include "rpsim/train/trainer.hpp"

using namespace rpsim::sim;
using namespace rpsim::sim::train;
using nlohmann::json;

namespace {

json with_data(json model, const char* data) {
  return {{"model", std::move(model)}, {"data", {{"name", data}, {"train_limit", 64}, {"test_limit", 8}}},
          {"batch_size", 4},           {"steps", 1},
          {"eval_batch_size", 4},      {"telemetry", {{"histogram_steps", json::array()}}}};
}

// One small config per row of the model table. A row without one here fails
// the test below: every model's size column is checked against its network.
const std::map<std::string, json>& row_configs() {
  static const std::map<std::string, json> configs{
      {"mlp", with_data({{"type", "mlp"}, {"hidden", {16, 8}}, {"layer_norm", true}}, "synthetic")},
      {"cnn", with_data({{"type", "cnn"}, {"channels", {4, 6}}}, "synthetic")},
      {"gpt", with_data({{"type", "gpt"}, {"n_layer", 2}, {"n_embd", 8}, {"n_head", 2}, {"block_size", 4}},
                        "synthetic-text")},
      {"layers", with_data({{"type", "layers"},
                            {"layers", json::parse(R"([{"op": "conv2d", "out_channels": 3, "kernel": 5,
                                                        "padding": 0}, {"op": "relu"},
                                                       {"op": "max_pool2d", "size": 3},
                                                       {"op": "conv2d", "out_channels": 2},
                                                       {"op": "layer_norm"}, {"op": "linear", "out": 10}])")}},
                           "synthetic")},
  };
  return configs;
}

double parameter_count(Model& m) {
  double n = 0;
  for (Parameter* p : m.parameters()) n += double(p->value.size());
  return n;
}

// The multiply-adds the network's matmuls do in a forward pass of one sample
// (fp32: every matmul goes through matmul(), which counts them).
double forward_multiply_adds(Model& m, const Config& c, const Dataset& d) {
  const StepContext ctx{&c.policy, 0, 0};
  Tensor t{d.batch({0}), &rpsim::formats::binary64()};
  CountMultiplyAdds count;
  for (auto& l : m.layers) t = l->forward(t, ctx);
  return count.count();
}

}  // namespace

TEST_CASE("run plan: every model row's plan numbers are those of the network it builds", "[config][plan]") {
  int checked = 0;
  for (const ModelInfo& row : model_types()) {
    INFO("model row " << row.name);
    const auto it = row_configs().find(row.name);
    if (it == row_configs().end()) FAIL("no config for this model row in test_run_plan.cpp: add one");
    const Config c = config::parse_config(it->second);
    const DataSplit data = load_data(c.data);
    const std::uint64_t before = Layer::constructed();
    const config::RunPlan plan = config::plan_run(c);
    CHECK(Layer::constructed() == before);  // no layer made
    Model m = build_model(c, data.train);
    CHECK(Layer::constructed() > before);  // the counter sees a build
    CHECK(double(plan.parameters) == parameter_count(m));
    REQUIRE(plan.forward_multiply_adds > 0);
    CHECK(plan.forward_multiply_adds == forward_multiply_adds(m, c, data.train));
    // The plan's model line is the row's own description.
    REQUIRE(row.describe != nullptr);
    const std::string line = row.describe(c.model);
    CHECK(line.rfind(row.name, 0) == 0);
    const auto loaded = config::read_config_json(it->second, "test");
    CHECK_THAT(
        config::describe_run(loaded, c, plan, ""),
        Catch::Contains("  model      " + line + "; " + std::to_string(plan.parameters) + " parameters"));
    ++checked;
  }
  CHECK(checked == int(row_configs().size()));
}

TEST_CASE("run plan: a planned run builds its model once, the plan none", "[config][plan]") {
  for (const char* row : {"mlp", "gpt"}) {
    INFO(row);
    const Config c = config::parse_config(row_configs().at(row));
    const std::uint64_t start = Layer::constructed();
    const config::RunPlan plan = config::plan_run(c);
    REQUIRE(Layer::constructed() == start);
    const DataSplit data = load_data(c.data);
    (void)build_model(c, data.train);
    const std::uint64_t one_model = Layer::constructed() - start;
    REQUIRE(one_model > 0);
    // As `rpsim train` does: the plan first, then the run on the plan's data.
    RunOptions options;
    options.data = plan.data;
    const std::uint64_t before_run = Layer::constructed();
    const RunResult result = run(c, options);
    CHECK(result.steps_done == 1);
    CHECK(Layer::constructed() - before_run == one_model);  // the FP64 shadow is a clone
  }
}

TEST_CASE("run plan: what build_model refuses, the plan refuses without building", "[config][plan]") {
  json j = row_configs().at("gpt");
  j["model"]["n_head"] = 3;
  const Config bad_heads = config::parse_config(j);
  const std::uint64_t before = Layer::constructed();
  CHECK_THROWS_WITH(config::plan_run(bad_heads), Catch::Contains("model.n_embd: 8 is not a multiple"));
  j = row_configs().at("cnn");
  j["model"]["channels"] = {2, 2, 2, 2, 2, 2};  // 28 -> 14 -> 7 -> 3 -> 1 -> no pixel left
  CHECK_THROWS_WITH(config::plan_run(config::parse_config(j)), Catch::Contains("model.channels: too many"));
  CHECK(Layer::constructed() == before);
}

// The estimate is the rate rows' figures times the plan's work (no timed
// test: the figures are measured by hand, run_plan.cpp says how). A changed
// row moves the estimate of its model and of no other; every model row has
// a figure.
TEST_CASE("run plan: the time estimate is computed from the rate rows", "[config][plan]") {
  const config::PlanRates& shipped = config::plan_rates();
  for (const ModelInfo& row : model_types()) {
    INFO("model row " << row.name);
    CHECK(std::any_of(shipped.models.begin(), shipped.models.end(),
                      [&](const config::ModelCost& m) { return std::string(m.model) == row.name; }));
  }
  const Config mlp = config::parse_config(row_configs().at("mlp"));
  const Config gpt = config::parse_config(row_configs().at("gpt"));
  const config::RunPlan mlp_plan = config::plan_run(mlp), gpt_plan = config::plan_run(gpt);
  CHECK(mlp_plan.estimate_s == config::estimate_seconds(mlp, mlp_plan, shipped));

  std::vector<config::ModelCost> models(shipped.models.begin(), shipped.models.end());
  for (auto& m : models)
    if (std::string(m.model) == "mlp") m.seconds_per_multiply_add *= 2;
  config::PlanRates changed = shipped;
  changed.models = models;
  // fp32 with the shadow: the matmul term is rate x 3 x batch x forward multiply-adds per step,
  // plus the evaluation's forward passes, emulated and shadow.
  REQUIRE(mlp.shadow);
  const double mlp_macs =
      double(mlp_plan.total_steps) * 3.0 * double(mlp.batch_size) * mlp_plan.forward_multiply_adds +
      2.0 * double(mlp_plan.evaluations) * double(mlp_plan.test_samples) * mlp_plan.forward_multiply_adds;
  double mlp_rate = 0;
  for (const auto& m : shipped.models)
    if (std::string(m.model) == "mlp") mlp_rate = m.seconds_per_multiply_add;
  CHECK(config::estimate_seconds(mlp, mlp_plan, changed) - mlp_plan.estimate_s ==
        Approx(mlp_rate * mlp_macs).epsilon(1e-9));
  CHECK(config::estimate_seconds(gpt, gpt_plan, changed) == gpt_plan.estimate_s);

  changed = shipped;
  changed.per_parameter += 1e-6;
  CHECK(config::estimate_seconds(gpt, gpt_plan, changed) - gpt_plan.estimate_s ==
        Approx(1e-6 * double(gpt_plan.total_steps) * double(gpt_plan.parameters)).epsilon(1e-9));
  changed = shipped;
  changed.no_shadow_factor = shipped.no_shadow_factor / 2;
  Config no_shadow = mlp;
  no_shadow.shadow = false;
  CHECK(config::estimate_seconds(no_shadow, mlp_plan, changed) <
        config::estimate_seconds(no_shadow, mlp_plan, shipped));
  // A model row without a figure is priced at the dearest one.
  const config::ModelCost only_gpt[] = {{"gpt", 1e-6}};
  changed = shipped;
  changed.models = only_gpt;
  CHECK(config::estimate_seconds(mlp, mlp_plan, changed) > 1e-6 * mlp_macs);
}
