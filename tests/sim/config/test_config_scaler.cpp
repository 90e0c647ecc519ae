// The config layer resolves a run's loss scaler once, into the typed value
// the trainer's factory takes: the row's defaults filled in, errors naming
// the field.
#include <catch2/catch.hpp>
#include <string>

#include "rpsim/config/config.hpp"
#include "small_config.hpp"

using namespace rpsim::sim;
using nlohmann::json;

namespace {

json small(const json& policy) {
  return rpsim::test::small_config(policy);
}

std::string parse_error(const json& j) {
  try {
    config::parse_config(j);
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("config scaler: the policy's default scaler comes resolved, its row's defaults filled in",
          "[config][scaler]") {
  const auto amp = config::parse_config(small("fp16-amp")).loss_scaler;
  CHECK(amp->policy == "pytorch");
  CHECK(amp->init_scale == 65536.0);  // torch.amp.GradScaler's defaults
  CHECK(amp->growth_interval == 2000);
  CHECK(amp->backoff_factor == 0.5);
  CHECK(config::parse_config(small("fp32")).loss_scaler->policy == "none");
}

TEST_CASE("config scaler: a loss_scaler section over the policy's default, resolved with its fields",
          "[config][scaler]") {
  json j = small("fp16-amp");
  j["loss_scaler"] = {{"growth_interval", 10}};  // the policy's default row, one field changed
  auto s = config::parse_config(j).loss_scaler;
  CHECK(s->policy == "pytorch");
  CHECK(s->growth_interval == 10);
  CHECK(s->init_scale == 65536.0);
  j["loss_scaler"] = {{"policy", "deepspeed"}, {"init_scale", 1024}};
  s = config::parse_config(j).loss_scaler;
  CHECK(s->policy == "deepspeed");
  CHECK(s->init_scale == 1024.0);
  CHECK(s->hysteresis == 2);  // DeepSpeed's delayed_shift default
  CHECK_FALSE(s->backoff_factor.has_value());
}

TEST_CASE("config scaler: a bad scaler setting is refused at parse time, naming the field",
          "[config][scaler]") {
  json j = small("fp16-amp");
  j["loss_scaler"] = {{"growth_factor", 0.5}};
  std::string m = parse_error(j);
  CHECK_THAT(m,
             Catch::StartsWith("loss_scaler: ") && Catch::Contains("growth_factor must be finite and > 1"));
  j["loss_scaler"] = {{"policy", "pytorch"}, {"hysteresis", 2}};
  m = parse_error(j);
  CHECK_THAT(m, Catch::StartsWith("loss_scaler: ") && Catch::Contains("hysteresis is not a parameter"));
  j["loss_scaler"] = {{"policy", "static"}};
  CHECK_THAT(parse_error(j), Catch::Contains("init_scale is required"));
  j["loss_scaler"] = {{"init_scale", "big"}};
  CHECK_THAT(parse_error(j), Catch::Contains("loss_scaler.init_scale"));
}
