// The model table's size column against the built models, and the memory
// check of a model too large to build, which must not build it.
#include <catch2/catch.hpp>
#include <filesystem>

#include "rpsim/config/config_loader.hpp"
#include "rpsim/config/run_plan.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/trainer.hpp"

using namespace rpsim::sim::config;
using namespace rpsim::sim::train;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

double built_parameters(const Config& c, const Dataset& d) {
  Model m = build_model(c, d);
  double n = 0;
  for (Parameter* p : m.parameters()) n += double(p->value.size());
  return n;
}

Config layers_config(const json& layers) {
  return parse_config(
      {{"model", {{"type", "layers"}, {"layers", layers}}},
       {"data", {{"name", "synthetic"}, {"synthetic_train_size", 16}, {"synthetic_test_size", 8}}},
       {"batch_size", 8}});
}

}  // namespace

TEST_CASE("model size: the size column counts the parameters of every shipped model", "[train][memory]") {
  int checked = 0;
  for (const auto& e : fs::directory_iterator(RPSIM_SOURCE_DIR "/experiments/configs")) {
    const std::string name = e.path().filename().string();
    // Studies and sweeps are not training configs (their runs are these).
    if (e.path().extension() != ".json" || name.rfind("study-", 0) == 0 || name.rfind("sweep-", 0) == 0)
      continue;
    INFO(name);
    Config c = read_config_file(e.path()).parse();
    c.data.train_limit = 64;
    c.data.test_limit = 16;
    const Dataset d = load_data(c.data).train;
    const ModelSize size = find_model_type(c.model.type)->size(c.model, d);
    CHECK(size.parameters == built_parameters(c, d));
    CHECK(size.activations_per_sample > 0);
    ++checked;
  }
  CHECK(checked >= 15);
}

TEST_CASE("model size: a layers model is sized from its specs, layer by layer", "[train][memory]") {
  const json stacks[] = {
      json::parse(R"([{"op": "linear", "out": 12}, {"op": "relu"}, {"op": "layer_norm"},
                      {"op": "gelu"}, {"op": "linear", "out": 10}])"),
      json::parse(R"([{"op": "conv2d", "out_channels": 3, "kernel": 5, "padding": 0}, {"op": "relu"},
                      {"op": "max_pool2d", "size": 3}, {"op": "conv2d", "out_channels": 2},
                      {"op": "linear", "out": 10}])"),
  };
  for (const json& layers : stacks) {
    const Config c = layers_config(layers);
    const Dataset d = load_data(c.data).train;
    INFO(layers.dump());
    const ModelSize s = find_model_type("layers")->size(c.model, d);
    CHECK(s.parameters == built_parameters(c, d));
  }
  // 784 -> 12 -> 10 by hand: weights and biases, LayerNorm's gain and bias.
  const Config c = layers_config(stacks[0]);
  const Dataset d = load_data(c.data).train;
  CHECK(find_model_type("layers")->size(c.model, d).parameters == 785 * 12 + 2 * 12 + 13 * 10);
  // The size column checks the entries as the builder does.
  const Config bad = layers_config(json::parse(R"([{"op": "linear", "out": 11}])"));
  CHECK_THROWS_WITH(find_model_type("layers")->size(bad.model, d),
                    Catch::Contains("the last layer gives 11 features"));
}

TEST_CASE("model size: a layers model too large for the machine is refused without being built",
          "[train][memory]") {
  // 2^20 x 2^20 weights: 2^40 binary64 values (8 TB). Building it throws
  // std::bad_alloc (Eigen's allocation fails), so an estimate that returns
  // the exact count below was worked out from the specs, never built.
  const Config c = layers_config(json::parse(R"([{"op": "linear", "out": 1048576}, {"op": "relu"},
                                                 {"op": "linear", "out": 1048576}, {"op": "linear", "out": 10}])"));
  const Dataset d = load_data(c.data).train;
  const double w = 1048576.0;
  const double params = 785 * w + (w + 1) * w + (w + 1) * 10;
  CHECK(find_model_type("layers")->size(c.model, d).parameters == params);
  const double activations = 784 + w + w + w + 10;
  const double need = memory_need_bytes(c, d);
  CHECK(need == 8 * (5 * params + double(c.eval_batch_size) * activations) * 2);
  CHECK_THROWS_WITH(check_run_fits(c, 16, need),
                    Catch::Contains("the run needs about") && Catch::Contains("GB"));

  const fs::path out = fs::temp_directory_path() / "rpsim-test-model-size-huge";
  fs::remove_all(out);
  RunOptions o;
  o.out_dir = out;
  CHECK_THROWS_AS(run(c, o), ConfigError);
  CHECK(!fs::exists(out));  // refused before the output folder is made
  CHECK_THROWS_WITH(plan_run(c), Catch::Contains("the run needs about"));
}
