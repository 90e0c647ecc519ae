// Framework recipes translate to rpsim configs with the same meaning, through
// the one loader (config_loader.hpp) that rpsim train, sweeps and studies use.
#include <catch2/catch.hpp>
#include <fstream>

#include "rpsim/config/config_keys.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/config/framework_config.hpp"
#include "rpsim/train/config_error.hpp"
#include "shared_data.hpp"

using namespace rpsim::sim::config;
using namespace rpsim::sim::train;
using nlohmann::json;

namespace {

std::filesystem::path example(const char* name) {
  return rpsim::test::source_dir() / "experiments/configs" / name;
}

Config parsed(const json& j, std::vector<std::string> sets = {}) {
  return read_config_json(j, "x.json", sets).parse();
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("the DeepSpeed documentation's fp16 config maps field by field", "[framework]") {
  const LoadedConfig l = read_config_file(example("deepspeed-fp16.json"));
  CHECK(l.vocabulary == "deepspeed");
  const Config c = l.parse();
  CHECK(c.name == "deepspeed-fp16");  // the file's stem
  CHECK(c.policy.name == "fp16-amp");
  CHECK(c.batch_size == 8);
  CHECK(c.optimizer.type == "adamw");  // FusedAdam's adam_w_mode defaults to True
  CHECK(c.optimizer.lr == Approx(0.00015));
  CHECK(c.loss_scaler->policy == "deepspeed");
  CHECK(c.loss_scaler->init_scale.value() == 65536.0);
  CHECK(c.loss_scaler->growth_interval.value() == 1000);
  CHECK(c.loss_scaler->hysteresis.value() == 2);
  CHECK(c.loss_scaler->min_scale.value() == 1.0);
  CHECK(!c.loss_scaler->consecutive_hysteresis);
  CHECK(has(l.ignored, "zero_optimization"));
  CHECK(has(l.ignored, "fp16.auto_cast"));
  CHECK(has(l.notes, "fp16.initial_scale_power 16 -> loss_scaler.init_scale 65536"));
}

TEST_CASE("DeepSpeed: static loss scale, bf16, clipping, batch arithmetic, bad values", "[framework]") {
  json ds = {{"train_batch_size", 64},
             {"fp16", {{"enabled", true}, {"loss_scale", 128}, {"hysteresis", 4}}},
             {"gradient_clipping", 1.0}};
  const LoadedConfig l = read_config_json(ds, "x.json");
  Config c = l.parse();
  CHECK(c.loss_scaler->policy == "static");
  CHECK(c.loss_scaler->init_scale.value() == 128);
  CHECK(has(l.ignored, "fp16.hysteresis (a static loss_scale is set)"));
  CHECK(c.max_grad_norm == 1.0);
  CHECK(c.batch_size == 64);

  const LoadedConfig b = read_config_file(example("deepspeed-bf16.json"));
  c = b.parse();
  CHECK(c.policy.name == "bf16-amp");
  CHECK(c.batch_size == 128);
  CHECK(c.optimizer.weight_decay == Approx(0.01));
  CHECK(!b.notes.empty());

  ds = {{"train_micro_batch_size_per_gpu", 16},
        {"gradient_accumulation_steps", 2},
        {"bf16", {{"enabled", true}}}};
  CHECK(parsed(ds).batch_size == 32);
  // raise_error_at_min_scale reaches the DeepSpeed scaler.
  ds = {{"train_batch_size", 8}, {"fp16", {{"enabled", true}, {"raise_error_at_min_scale", true}}}};
  CHECK(parsed(ds).loss_scaler->raise_at_min_scale);

  ds = {{"train_batch_size", 8}, {"fp16", {{"enabled", true}, {"loss_scale", -1}}}};
  CHECK_THROWS_WITH(parsed(ds), Catch::StartsWith("x.json: fp16.loss_scale"));
  ds = {{"train_batch_size", 8}, {"fp16", {{"enabled", true}, {"hysteresis", "two"}}}};
  CHECK_THROWS_WITH(parsed(ds), Catch::Contains("fp16.hysteresis: expected an integer"));
  ds = {{"train_batch_size", 8}, {"optimizer", {{"type", "Lamb"}, {"params", {{"lr", 0.1}}}}}};
  CHECK_THROWS_WITH(parsed(ds), Catch::Contains("optimizer.type"));
  ds = {{"fp16", {{"enabled", true}}}, {"bf16", {{"enabled", true}}}};
  CHECK_THROWS_WITH(parsed(ds), Catch::Contains("both enabled"));
}

TEST_CASE("a DeepSpeed file with rpsim's steps, model or data stays a DeepSpeed file", "[framework]") {
  json ds = {{"train_batch_size", 8},
             {"fp16", {{"enabled", true}}},
             {"steps", 5},
             {"model", {{"hidden", {32}}}},
             {"data", {{"name", "synthetic"}}}};
  const LoadedConfig l = read_config_json(ds, "x.json");
  CHECK(l.vocabulary == "deepspeed");
  const Config c = l.parse();
  CHECK(c.steps == 5);
  CHECK(c.model.hidden == std::vector<int>{32});
  CHECK(c.data.name == "synthetic");
  CHECK(c.policy.name == "fp16-amp");
  CHECK(looks_like_deepspeed(ds));
}

TEST_CASE("every unknown key at once, with the nearest names and the other vocabulary's name",
          "[framework]") {
  const json ds = {{"train_batch_size", 8},
                   {"fp16", {{"enabled", true}, {"initial_scale_powr", 4}}},
                   {"zero_optimisation", true},
                   {"batch_size", 8},
                   {"model", {{"hiden", {8}}}}};
  try {
    (void)read_config_json(ds, "ds.json");
    FAIL("no error");
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK_THAT(m, Catch::StartsWith("ds.json: 4 problems:"));
    CHECK_THAT(m,
               Catch::Contains("fp16.initial_scale_powr: unknown key (did you mean initial_scale_power?)"));
    CHECK_THAT(m, Catch::Contains("zero_optimisation: unknown key (did you mean zero_optimization?)"));
    CHECK_THAT(m, Catch::Contains("batch_size: unknown key") && Catch::Contains("calls it train_batch_size"));
    CHECK_THAT(m, Catch::Contains("model.hiden: unknown key (did you mean hidden?)"));
  }
  // rpsim's vocabulary: a DeepSpeed name set with --set names rpsim's key.
  try {
    (void)read_config_file(example("mlp-fp16-amp.json"),
                           {"optimizer.params.lr=1", "loss_scalr.init_scale=2"});
    FAIL("no error");
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK_THAT(m, Catch::Contains("2 problems"));
    CHECK_THAT(
        m, Catch::Contains("optimizer.params: unknown key") && Catch::Contains("where it is optimizer.lr"));
    CHECK_THAT(m, Catch::Contains("loss_scalr: unknown key (did you mean loss_scaler?)"));
  }
}

TEST_CASE("an override (--set) takes a key in the vocabulary the file uses", "[framework]") {
  CHECK(read_config_file(example("deepspeed-fp16.json"), {"fp16.initial_scale_power=10"})
            .parse()
            .loss_scaler->init_scale.value() == 1024);
  CHECK(read_config_file(example("pytorch-gradscaler.json"), {"grad_scaler.init_scale=1024"})
            .parse()
            .loss_scaler->init_scale.value() == 1024);
  CHECK(read_config_file(example("te-fp8-delayed.json"), {"fp8_recipe.margin=1"}).parse().policy.fp8.margin ==
        1);
  CHECK(
      read_config_file(example("keras-mixed-float16.json"), {"policy=mixed_bfloat16"}).parse().policy.name ==
      "bf16-amp");
  CHECK(read_config_file(example("deepspeed-fp16.json"), {"steps=7"}).parse().steps == 7);
  // A key inside a named policy given as a string.
  const Config c =
      read_config_file(example("mlp-fp32.json"), {"policy.accumulation=tc:h100:fp16:fp32"}).parse();
  CHECK(c.policy.rule("linear").accumulation.spec() == "tc:h100:binary16:binary32");
  // grad_scaler beside loss_scaler: one problem naming rpsim's key.
  CHECK_THROWS_WITH(read_config_file(example("mlp-fp16-amp.json"), {"grad_scaler.init_scale=1024"}),
                    Catch::Contains("loss_scaler.init_scale"));
  CHECK_THROWS_WITH(read_config_file(example("mlp-fp8.json"), {"fp8_recipe.margin=1"}),
                    Catch::Contains("policy.fp8.margin"));
}

TEST_CASE("Keras policy names, GradScaler keywords and TE recipe fields", "[framework]") {
  Config c = read_config_file(example("keras-mixed-float16.json")).parse();
  CHECK(c.policy.name == "fp16-amp");
  CHECK(c.loss_scaler->policy == "keras");
  CHECK(parsed(json{{"policy", "mixed_bfloat16"}}).policy.name == "bf16-amp");

  c = read_config_file(example("pytorch-gradscaler.json")).parse();
  CHECK(c.loss_scaler->policy == "pytorch");
  CHECK(c.loss_scaler->init_scale.value() == 65536.0);
  CHECK(c.loss_scaler->growth_interval.value() == 2000);
  c = parsed(json{{"policy", "fp16-amp"}, {"grad_scaler", {{"enabled", false}}}});
  CHECK(c.loss_scaler->policy == "none");
  CHECK_THROWS_WITH(parsed(json{{"grad_scaler", {{"init_scal", 2}}}}),
                    Catch::Contains("grad_scaler.init_scal: unknown key (did you mean init_scale?)"));

  c = read_config_file(example("te-fp8-delayed.json")).parse();
  CHECK(c.policy.fp8.scaling == Fp8Scaling::delayed);
  CHECK(c.policy.fp8.amax_history_len == 16);
  CHECK(c.policy.fp8.amax_compute_algo == rpsim::sim::AmaxComputeAlgo::max);
  c = parsed(json{{"fp8_recipe", {{"fp8_format", "E4M3"}, {"amax_history_len", 4}, {"margin", 1}}}});
  CHECK(c.policy.rule("linear").backward_compute->name == "e4m3");
  CHECK(c.policy.fp8.margin == 1);
  CHECK_THROWS_WITH(parsed(json{{"fp8_recipe", {{"fp8_format", "E5M2"}}}}),
                    Catch::Contains("fp8_recipe.fp8_format"));
}

TEST_CASE("config files: a folder, a missing file and a bad override say so", "[framework]") {
  const auto dir = rpsim::test::source_dir() / "experiments/configs";
  CHECK_THROWS_WITH(read_config_file(dir), Catch::Contains("is a folder, not a config file"));
  CHECK_THROWS_WITH(read_config_file(dir / "missing.json"), Catch::Contains("missing.json: cannot open"));
  CHECK_THROWS_WITH(read_config_file(example("mlp-fp32.json"), {"nonsense"}),
                    Catch::Contains("expected key=value"));
  CHECK_THROWS_WITH(read_config_file(example("mlp-fp32.json"), {"seed.x=1"}),
                    Catch::Contains("seed.x: seed is 0, not an object"));
}

TEST_CASE("nearest names: typos, swaps and names inside names", "[framework]") {
  const std::vector<std::string> known{"init_scale", "growth_factor", "growth_interval", "hysteresis"};
  CHECK(nearest_names("init_scal", known) == std::vector<std::string>{"init_scale"});
  CHECK(nearest_names("hystersis", known) == std::vector<std::string>{"hysteresis"});
  CHECK(nearest_names("growth", known).size() == 2);
  CHECK(nearest_names("colour", known).empty());
  CHECK(did_you_mean("colour", known).empty());
}
