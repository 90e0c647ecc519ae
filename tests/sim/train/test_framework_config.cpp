// Framework recipes translate to rpsim configs with the same meaning.
#include <catch2/catch.hpp>
#include <fstream>

#include "rpsim/train/config_error.hpp"
#include "rpsim/train/framework_config.hpp"
#include "rpsim/train/trainer.hpp"
#include "shared_data.hpp"

using namespace rpsim::sim::train;
using nlohmann::json;

namespace {
json load(const char* name) {
  std::ifstream in(rpsim::test::source_dir() / "experiments/configs" / name);
  REQUIRE(in);
  return json::parse(in);
}
}  // namespace

TEST_CASE("the DeepSpeed documentation's fp16 config maps field by field", "[framework]") {
  const json ds = load("deepspeed-fp16.json");
  REQUIRE(looks_like_deepspeed(ds));
  const Translation t = translate_framework_config(ds, "deepspeed-fp16.json");
  CHECK(t.kind == "deepspeed");
  const Config c = parse_config(t.config);
  CHECK(c.policy.name == "fp16-amp");
  CHECK(c.batch_size == 8);
  CHECK(c.optimizer.type == "adamw");  // FusedAdam's adam_w_mode defaults to True
  CHECK(c.optimizer.lr == Approx(0.00015));
  CHECK(c.loss_scaler.policy == "deepspeed");
  CHECK(c.loss_scaler.init_scale.value() == 65536.0);
  CHECK(c.loss_scaler.growth_interval.value() == 1000);
  CHECK(c.loss_scaler.hysteresis.value() == 2);
  CHECK(c.loss_scaler.min_scale.value() == 1.0);
  CHECK(!c.loss_scaler.consecutive_hysteresis);
  CHECK(std::find(t.ignored.begin(), t.ignored.end(), "zero_optimization") != t.ignored.end());
  CHECK(std::find(t.ignored.begin(), t.ignored.end(), "fp16.auto_cast") != t.ignored.end());
}

TEST_CASE("DeepSpeed: static loss scale, bf16, clipping, batch arithmetic, unknown fields", "[framework]") {
  json ds = {{"train_batch_size", 64},
             {"fp16", {{"enabled", true}, {"loss_scale", 128}}},
             {"gradient_clipping", 1.0}};
  Config c = parse_config(translate_framework_config(ds, "x.json").config);
  CHECK(c.loss_scaler.policy == "static");
  CHECK(c.loss_scaler.init_scale.value() == 128);
  CHECK(c.max_grad_norm == 1.0);
  CHECK(c.batch_size == 64);

  const Translation b = translate_framework_config(load("deepspeed-bf16.json"), "deepspeed-bf16.json");
  c = parse_config(b.config);
  CHECK(c.policy.name == "bf16-amp");
  CHECK(c.batch_size == 128);
  CHECK(c.optimizer.weight_decay == Approx(0.01));
  CHECK(!b.notes.empty());

  ds = {{"train_micro_batch_size_per_gpu", 16},
        {"gradient_accumulation_steps", 2},
        {"bf16", {{"enabled", true}}}};
  CHECK(parse_config(translate_framework_config(ds, "y.json").config).batch_size == 32);

  ds = {{"train_batch_size", 8}, {"fp16", {{"enabled", true}}}, {"frobnicate", 1}};
  CHECK_THROWS_WITH(translate_framework_config(ds, "z.json"),
                    Catch::Contains("z.json") && Catch::Contains("frobnicate"));
  ds = {{"train_batch_size", 8}, {"fp16", {{"enabled", true}, {"loss_scale", -1}}}};
  CHECK_THROWS_WITH(translate_framework_config(ds, "z.json"), Catch::Contains("fp16.loss_scale"));
  ds = {{"train_batch_size", 8}, {"optimizer", {{"type", "Lamb"}, {"params", {{"lr", 0.1}}}}}};
  CHECK_THROWS_WITH(translate_framework_config(ds, "z.json"), Catch::Contains("optimizer.type"));
}

TEST_CASE("Keras policy names, GradScaler keywords and TE recipe fields", "[framework]") {
  Config c = parse_config(translate_framework_config(load("keras-mixed-float16.json"), "k").config);
  CHECK(c.policy.name == "fp16-amp");
  CHECK(c.loss_scaler.policy == "keras");
  c = parse_config(translate_framework_config(json{{"policy", "mixed_bfloat16"}}, "k").config);
  CHECK(c.policy.name == "bf16-amp");

  c = parse_config(translate_framework_config(load("pytorch-gradscaler.json"), "p").config);
  CHECK(c.loss_scaler.policy == "pytorch");
  CHECK(c.loss_scaler.init_scale.value() == 65536.0);
  CHECK(c.loss_scaler.growth_interval.value() == 2000);
  c = parse_config(
      translate_framework_config(json{{"policy", "fp16-amp"}, {"grad_scaler", {{"enabled", false}}}}, "p")
          .config);
  CHECK(c.loss_scaler.policy == "none");
  CHECK_THROWS_WITH(translate_framework_config(json{{"grad_scaler", {{"init_scal", 2}}}}, "p.json"),
                    Catch::Contains("grad_scaler.init_scal"));

  c = parse_config(translate_framework_config(load("te-fp8-delayed.json"), "t").config);
  CHECK(c.policy.fp8.scaling == Fp8Scaling::delayed);
  CHECK(c.policy.fp8.amax_history_len == 16);
  CHECK(c.policy.fp8.amax_compute_algo == "max");
  json e4m3 = {{"fp8_recipe", {{"fp8_format", "E4M3"}, {"amax_history_len", 4}, {"margin", 1}}}};
  c = parse_config(translate_framework_config(e4m3, "t").config);
  CHECK(c.policy.rule("linear").backward_compute->name == "e4m3");
  CHECK(c.policy.fp8.margin == 1);
  CHECK_THROWS_WITH(translate_framework_config(json{{"fp8_recipe", {{"fp8_format", "E5M2"}}}}, "t.json"),
                    Catch::Contains("fp8_recipe.fp8_format"));
}
