// Precision policies: the accumulation of every op is one of sim's models,
// given as a spec string or a JSON object, policy-wide or per op; a bad one
// is a ConfigError naming the key.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "rpsim/config/config.hpp"
#include "rpsim/config/policy_json.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/policy.hpp"
#include "rpsim/train/trainer.hpp"

using namespace rpsim;
using namespace rpsim::sim::config;
using namespace rpsim::sim::train;

namespace {

PrecisionPolicy policy(const char* json) {
  return policy_from_json(nlohmann::json::parse(json), "policy");
}

std::string linear_spec(const PrecisionPolicy& p) {
  return p.rule("linear").accumulation.spec();
}

}  // namespace

TEST_CASE("train: named policies accumulate in binary32, the FP64 policy in binary64 in order", "[train]") {
  for (const auto& name : policy_names()) {
    INFO(name);
    CHECK(linear_spec(named_policy(name)) ==
          (name == "fp64" ? "sequential:binary64:rne" : "sequential:binary32:rne"));
  }
  CHECK(named_policy("fp16-amp").to_json()["ops"]["linear"]["accumulation"] == "sequential:binary32:rne");
}

TEST_CASE("train: policy accumulation takes any sim spec or JSON object, policy-wide or per op", "[train]") {
  const PrecisionPolicy tc = policy(R"({"name": "fp16-amp", "accumulation": "tc:h100:fp16:fp32"})");
  CHECK(linear_spec(tc) == "tc:h100:binary16:binary32");
  CHECK(tc.rule("conv2d").accumulation.spec() == "tc:h100:binary16:binary32");
  CHECK(tc.to_json()["ops"]["linear"]["accumulation"] == "tc:h100:binary16:binary32");
  CHECK(linear_spec(policy(R"({"name": "bf16-pure", "accumulation": "sequential:bf16:sr"})")) ==
        "sequential:bfloat16:sr:seed=0");
  CHECK(linear_spec(policy(R"({"name": "fp32", "accumulation": "blocked:32:fp16"})")) ==
        "blocked:32:binary16:rne");
  const PrecisionPolicy per_op = policy(R"({"name": "fp32", "ops": {"linear": {"accumulation":
      {"kind": "tc", "preset": "a100", "input": "tf32", "output": "fp32"}}}})");
  CHECK(linear_spec(per_op) == "tc:a100:tf32:binary32");
  CHECK(per_op.rule("conv2d").accumulation.spec() == "sequential:binary32:rne");
  CHECK(linear_spec(policy(R"({"name": "fp8", "ops": {"linear": {"accumulation": "tc:h100:e4m3:fp32"}}})")) ==
        "tc:h100:e4m3:binary32");
}

TEST_CASE("train: a bad accumulation model is rejected naming the key", "[train]") {
  struct Case {
    const char* json;
    const char* expect;
  };
  const Case cases[] = {
      {R"({"name": "fp16-amp", "accumulation": "tc:h999"})",
       "policy.accumulation: accumulation model 'tc:h999'"},
      {R"({"name": "fp32", "accumulation": "fp32"})",
       "policy.accumulation: accumulation model 'fp32': unknown kind"},
      {R"({"name": "fp32", "accumulation": "blocked:0:fp16"})", "policy.accumulation: accumulation model"},
      {R"({"name": "fp32", "accumulation": "sequential:fp99"})", "fp99"},
      {R"({"name": "fp32", "accumulation": 32})", "policy.accumulation: expected an accumulation model spec"},
      {R"({"name": "fp32", "accumulation": {"format": "fp16"}})",
       "policy.accumulation: accumulation model JSON"},
      {R"({"name": "fp32", "ops": {"linear": {"accumulation": "tc:h100:fp64"}}})",
       "policy.ops.linear.accumulation: accumulation model 'tc:h100:fp64'"},
      {R"({"name": "fp32", "ops": {"conv2d": {"accumulation": {"kind": "sequential", "rounding": "rnx"}}}})",
       "policy.ops.conv2d.accumulation:"},
  };
  for (const Case& c : cases) {
    INFO(c.json);
    CHECK_THROWS_AS(policy(c.json), ConfigError);
    CHECK_THROWS_WITH(policy(c.json), Catch::StartsWith("policy.") && Catch::Contains(c.expect));
  }
  // Through the whole config, before any work.
  auto config =
      nlohmann::json::parse(R"({"name": "x", "policy": {"name": "fp16-amp", "accumulation": "tc:h999"},
      "data": {"name": "synthetic"}, "steps": 1})");
  CHECK_THROWS_WITH(parse_config(config),
                    Catch::StartsWith("policy.accumulation: accumulation model 'tc:h999'"));
}
