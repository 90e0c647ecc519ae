// A framework field is honoured, or refused or listed by name: never dropped
// or changed silently. Each case here was a silent change before (a new
// user's first hour, brief K): an ignored field whose value changes the
// arithmetic, a power of two that wrapped, a Keras name unknown.
#include <catch2/catch.hpp>

#include "rpsim/config/config_loader.hpp"
#include "rpsim/config/framework_config.hpp"
#include "rpsim/train/config_error.hpp"

using namespace rpsim::sim::config;
using namespace rpsim::sim::train;
using nlohmann::json;

namespace {

LoadedConfig loaded(const json& j) {
  return read_config_json(j, "x.json");
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

json deepspeed(json extra) {
  json ds = {{"train_batch_size", 8}};
  ds.update(extra);
  return ds;
}

}  // namespace

TEST_CASE("DeepSpeed: initial_scale_power past a double's range is refused, not wrapped", "[framework]") {
  // 2^32 + 16 was cast to int and became 2^16 = 65536 without a word.
  const json wrap = deepspeed({{"fp16", {{"enabled", true}, {"initial_scale_power", 4294967312LL}}}});
  CHECK_THROWS_WITH(loaded(wrap).parse(), Catch::Contains("fp16.initial_scale_power: 2^4294967312"));
  CHECK_THROWS_WITH(loaded(deepspeed({{"fp16", {{"enabled", true}, {"initial_scale_power", 5000}}}})).parse(),
                    Catch::Contains("fp16.initial_scale_power"));
  // Large but representable: honoured as DeepSpeed does (2**40).
  const Config c = loaded(deepspeed({{"fp16", {{"enabled", true}, {"initial_scale_power", 40}}}})).parse();
  CHECK(c.loss_scaler->init_scale.value() == std::ldexp(1.0, 40));
}

TEST_CASE("DeepSpeed: a field ignored only where it changes nothing", "[framework]") {
  // At their neutral values these stay listed as ignored...
  const LoadedConfig l = loaded(deepspeed(
      {{"fp16", {{"enabled", true}, {"fp16_master_weights_and_grads", false}}},
       {"amp", {{"enabled", false}, {"opt_level", "O1"}}},
       {"optimizer",
        {{"type", "Adam"}, {"params", {{"lr", 1e-3}, {"amsgrad", false}, {"bias_correction", true}}}}}}));
  CHECK(has(l.ignored, "fp16.fp16_master_weights_and_grads"));
  CHECK(has(l.ignored, "optimizer.params.amsgrad"));
  CHECK(has(l.ignored, "optimizer.params.bias_correction"));
  CHECK(has(l.ignored, "amp"));
  // ...and any other value is another run: refused, naming the field.
  const std::pair<json, const char*> refused[] = {
      {{{"fp16", {{"enabled", true}, {"fp16_master_weights_and_grads", true}}}},
       "fp16.fp16_master_weights_and_grads: true is not simulated"},
      {{{"bf16", {{"enabled", true}, {"check_grad_overflow", true}}}}, "bf16.check_grad_overflow: true"},
      {{{"optimizer", {{"type", "Adam"}, {"params", {{"amsgrad", true}}}}}},
       "optimizer.params.amsgrad: true"},
      {{{"optimizer", {{"type", "AdamW"}, {"params", {{"bias_correction", false}}}}}},
       "optimizer.params.bias_correction: false"},
      {{{"amp", {{"enabled", true}, {"opt_level", "O2"}}}}, "amp.enabled: true is not simulated: Apex AMP"},
      {{{"torch_autocast", {{"enabled", true}, {"dtype", "bfloat16"}}}}, "torch_autocast.enabled: true"},
  };
  for (const auto& [extra, message] : refused) {
    INFO(extra.dump());
    CHECK_THROWS_WITH(loaded(deepspeed(extra)).parse(), Catch::Contains(message));
  }
}

TEST_CASE("DeepSpeed: a negative gradient_clipping is named as the file wrote it", "[framework]") {
  CHECK_THROWS_WITH(loaded(deepspeed({{"gradient_clipping", -1}})).parse(),
                    Catch::StartsWith("x.json: gradient_clipping: must be a finite number >= 0"));
}

TEST_CASE("DeepSpeed: unknown keys are named with the bad value that stopped the translation",
          "[framework]") {
  const json ds =
      deepspeed({{"fp16", {{"enabld", true}}},
                 {"scheduler", {{"type", "WarmupLR"}, {"params", {{"warmup_num_steps", 10}, {"bar", 2}}}}}});
  CHECK_THROWS_WITH(loaded(ds).parse(), Catch::Contains("2 problems") && Catch::Contains("fp16.enabld") &&
                                            Catch::Contains("scheduler.params.bar"));
  // Alone, a bad value's message is as before.
  CHECK_THROWS_WITH(loaded(deepspeed({{"gradient_clipping", -1}})).parse(),
                    Catch::StartsWith("x.json: gradient_clipping:"));
}

TEST_CASE("DeepSpeed: bf16 and bfloat16 both enabled names the two spellings", "[framework]") {
  const json ds = deepspeed({{"bf16", {{"enabled", true}}}, {"bfloat16", {{"enabled", true}}}});
  CHECK_THROWS_WITH(loaded(ds).parse(), Catch::Contains("bf16 and bfloat16"));
}

TEST_CASE("Transformer Engine: recipe fields that change the arithmetic are refused", "[framework]") {
  const json base = {{"data", {{"name", "synthetic"}}}};
  auto with = [&](json recipe) {
    json c = base;
    c["fp8_recipe"] = std::move(recipe);
    return c;
  };
  // TE's defaults are simulated: listed as ignored.
  const LoadedConfig l = loaded(
      with({{"override_linear_precision", {false, false, false}}, {"fp8_dpa", false}, {"interval", 1}}));
  CHECK(has(l.ignored, "fp8_recipe.override_linear_precision"));
  CHECK(has(l.ignored, "fp8_recipe.fp8_dpa"));
  CHECK(has(l.ignored, "fp8_recipe.interval"));
  CHECK_THROWS_WITH(loaded(with({{"override_linear_precision", {false, true, false}}})).parse(),
                    Catch::Contains("fp8_recipe.override_linear_precision: [false,true,false] keeps a GEMM"));
  CHECK_THROWS_WITH(loaded(with({{"override_linear_precision", {true}}})).parse(),
                    Catch::Contains("expected three booleans"));
  CHECK_THROWS_WITH(loaded(with({{"fp8_mha", true}})).parse(), Catch::Contains("fp8_recipe.fp8_mha: true"));
  CHECK_THROWS_WITH(loaded(with({{"fp8_dpa", true}})).parse(), Catch::Contains("fp8_recipe.fp8_dpa: true"));
}

TEST_CASE("GradScaler(enabled=False) lists its other keywords as ignored", "[framework]") {
  const LoadedConfig l =
      loaded({{"policy", "fp16-amp"}, {"grad_scaler", {{"enabled", false}, {"init_scale", 5}}}});
  CHECK(l.parse().loss_scaler->policy == "none");
  CHECK(has(l.ignored, "grad_scaler.init_scale (enabled is false)"));
  CHECK(!has(l.notes, "grad_scaler.init_scale -> loss_scaler.init_scale"));
}

TEST_CASE("Keras: every dtype policy name, with Keras's own loss scaling", "[framework]") {
  const std::tuple<const char*, const char*, const char*> rows[] = {
      {"mixed_float16", "fp16-amp", "keras"},
      {"mixed_bfloat16", "bf16-amp", "none"},
      {"float16", "fp16-pure", "none"},  // Keras scales only under mixed_float16
      {"bfloat16", "bf16-pure", "none"},
      {"float32", "fp32", "none"},
      {"float64", "fp64", "none"}};
  for (const auto& [keras, policy, scaler] : rows) {
    INFO(keras);
    const Config c = loaded({{"policy", keras}}).parse();
    CHECK(c.policy.name == policy);
    CHECK(c.loss_scaler->policy == scaler);
  }
}

TEST_CASE("an integer past its int field's range is refused, not cast", "[config]") {
  // 2^32 + 1 epochs was 1 epoch, 10^12 a negative step count; 2^32 + 2 a margin of 2.
  const json base = {{"data", {{"name", "synthetic"}}}, {"steps", 0}};
  auto with = [&](const char* key, json value) {
    json c = base;
    c[key] = std::move(value);
    return c;
  };
  CHECK_THROWS_WITH(loaded(with("epochs", 4294967297LL)).parse(),
                    Catch::Contains("epochs: must be at most 1073741824, got 4294967297"));
  const std::pair<const char*, long long> fp8[] = {{"amax_history_len", 4294967297LL},
                                                   {"margin", 4294967298LL},
                                                   {"block_size", 4294967328LL},
                                                   {"high_precision_last", 4294967297LL},
                                                   {"hadamard", 4294967312LL}};
  for (const auto& [key, value] : fp8) {
    INFO(key);
    const json policy = {{"name", "fp8"}, {"fp8", {{key, value}}}};
    CHECK_THROWS_WITH(loaded(with("policy", policy)).parse(),
                      Catch::Contains(std::string("policy.fp8.") + key + ": must be at most"));
  }
}
