// The config layer reads facts from the tables' rows, not from names: a
// scaler's alias from its row, a policy's base row as a typed field (no
// "+custom" split), and the plan's price from the policy's formats.
#include <catch2/catch.hpp>
#include <string>

#include "rpsim/config/config.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/config/run_plan.hpp"
#include "small_config.hpp"

using namespace rpsim::sim;
using nlohmann::json;

namespace {

json small(const json& policy) {
  return rpsim::test::small_config(policy);
}

double estimate(const json& policy) {
  return config::plan_run(config::parse_config(small(policy))).estimate_s;
}

}  // namespace

TEST_CASE("config rows: \"dynamic\" is the pytorch row's alias, for a policy's default and a loss_scaler",
          "[config]") {
  CHECK(config::parse_config(small("fp16-amp")).loss_scaler->policy == "pytorch");
  json j = small("fp32");
  j["loss_scaler"] = {{"policy", "dynamic"}};
  CHECK(config::parse_config(j).loss_scaler->policy == "pytorch");
  j["loss_scaler"] = {{"policy", "dynamc"}};
  CHECK_THROWS_AS(config::parse_config(j), config::ConfigError);
}

TEST_CASE("config rows: a policy with overrides keeps its table row as a typed field", "[config]") {
  const auto plain = config::parse_config(small("bf16-amp"));
  CHECK(plain.policy.base == "bf16-amp");
  CHECK(plain.policy.name == "bf16-amp");
  const auto custom = config::parse_config(small({{"name", "bf16-amp"}, {"kahan", true}}));
  CHECK(custom.policy.base == "bf16-amp");
  CHECK(custom.policy.name == "bf16-amp+custom");  // meta.json's name, unchanged
  const auto loaded = config::read_config_json(small({{"name", "bf16-amp"}, {"kahan", true}}), "test");
  const std::string text = config::describe_run(loaded, custom, config::plan_run(custom), "");
  CHECK(text.find("bf16-amp+custom: ") != std::string::npos);
  CHECK(text.find("with the config's overrides") != std::string::npos);
}

TEST_CASE("config rows: the plan prices a policy by its formats, not by its name", "[config]") {
  const double fp32 = estimate("fp32");
  // Overrides that keep every format binary32 cost what fp32 costs ...
  CHECK(estimate({{"name", "fp32"}, {"rounding", "rne"}}) == fp32);
  // ... and a name starting with fp32 is no discount once a format narrows.
  CHECK(estimate({{"name", "fp32"}, {"weights", "bf16"}}) > fp32);
  CHECK(estimate("bf16-pure") > fp32);
  CHECK(estimate("fp64") > fp32);
}
