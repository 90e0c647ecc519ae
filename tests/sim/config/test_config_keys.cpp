// The key tables' one check (config_keys.hpp): unknown keys and values of the
// wrong type, at every depth, reported together, each once, as
// "FILE: FIELD: why".
#include <catch2/catch.hpp>

#include <set>

#include "rpsim/config/config.hpp"
#include "rpsim/config/config_keys.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/config/policy_json.hpp"

using namespace rpsim::sim::config;
using nlohmann::json;

namespace {

json small() {
  return json::parse(R"({
    "name": "keys", "policy": "fp16-amp", "model": {"type": "mlp", "hidden": [8]},
    "data": {"name": "synthetic", "synthetic_train_size": 64, "synthetic_test_size": 32},
    "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 16, "steps": 2})");
}

// The loader's message for `j` as if read from "x.json" (empty: no error).
std::string error_of(const json& j) {
  try {
    (void)read_config_json(j, "x.json").parse();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("config keys: an unknown key at the top or inside a section is named once", "[config][keys]") {
  REQUIRE(error_of(small()).empty());
  struct Case {
    const char* where;  // dotted path to set
    json value;
    const char* field;  // as the message names it
  };
  const std::vector<Case> cases{
      {"colour", "red", "colour"},
      {"model.hiden", json::array({8}), "model.hiden"},
      {"policy.weigths", "bf16", "policy.weigths"},
      {"policy.fp8.marjin", 1, "policy.fp8.marjin"},
      {"policy.ops.linear.outptu", "bf16", "policy.ops.linear.outptu"},
      {"loss_scaler.init_scal", 1024, "loss_scaler.init_scal"},
  };
  for (const Case& c : cases) {
    json j = small();
    set_config_path(j, c.where, c.value);
    const std::string m = error_of(j);
    INFO(m);
    CHECK(m.rfind(std::string("x.json: ") + c.field + ": unknown key", 0) == 0);
    CHECK(count(m, c.field) == 1);
  }
  // Near names are suggested from the row's own table.
  json j = small();
  set_config_path(j, "model.hiden", json::array({8}));
  CHECK_THAT(error_of(j), Catch::Contains("did you mean hidden?"));
}

TEST_CASE("config keys: a value of the wrong type is named once, with the value", "[config][keys]") {
  struct Case {
    const char* where;
    json value;
    const char* expect;
  };
  const std::vector<Case> cases{
      {"optimizer.lr", "x", "x.json: optimizer.lr: expected a number, got \"x\""},
      {"seed", 1.5, "x.json: seed: expected an integer, got 1.5"},
      // Whole but past any long long: refused, not cast (the fuzzer's find).
      {"seed", 1.24444e41, "x.json: seed: expected an integer, got 1.24444e+41"},
      {"model.hidden", json::array({8, -1e300}), "x.json: model.hidden[1]: expected an integer, got -1e+300"},
      {"shadow", "yes", "x.json: shadow: expected true or false, got \"yes\""},
      {"model.hidden", json::array({8, "a"}), "x.json: model.hidden[1]: expected an integer, got \"a\""},
      {"model", 3, "x.json: model: expected an object, got 3"},
      {"policy.kahan", 1, "x.json: policy.kahan: expected true or false, got 1"},
      {"policy.fp8.margin", "big", "x.json: policy.fp8.margin: expected an integer, got \"big\""},
      {"policy.autocast.allow", "linear", "x.json: policy.autocast.allow: expected a list of strings"},
      {"loss_scaler.init_scale", "big", "x.json: loss_scaler.init_scale: expected a number, got \"big\""},
      {"telemetry.histogram_steps", 5,
       "x.json: telemetry.histogram_steps: expected a list of integers, got 5"},
  };
  for (const Case& c : cases) {
    json j = small();
    set_config_path(j, c.where, c.value);
    const std::string m = error_of(j);
    INFO(c.where << ": " << m);
    CHECK(m.rfind(c.expect, 0) == 0);
    CHECK(count(m, std::string(c.where) + ":") + count(m, std::string(c.where) + "[") == 1);
  }
}

TEST_CASE("config keys: every problem of a config at once, each once", "[config][keys]") {
  json j = small();
  j["colour"] = "red";
  j["optimizer"]["lr"] = "fast";
  j["model"]["hiden"] = json::array({8});
  j["policy"] = {{"name", "fp16-amp"}, {"gradients", 16}, {"fp8", {{"margn", 0}}}};
  j["loss_scaler"] = {{"policy", "pytorch"}, {"growth_intervl", 10}};
  const std::string m = error_of(j);
  INFO(m);
  CHECK(m.rfind("x.json: 6 problems:", 0) == 0);
  for (const char* field : {"colour: unknown key", "optimizer.lr: expected a number, got \"fast\"",
                            "model.hiden: unknown key", "policy.gradients: expected a string, got 16",
                            "policy.fp8.margn: unknown key", "loss_scaler.growth_intervl: unknown key"})
    CHECK(count(m, field) == 1);
  // parse_config (JSON from no file) makes the same check, once.
  try {
    (void)parse_config(j);
    FAIL("accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).rfind("6 problems:", 0) == 0);
  }
}

TEST_CASE("config keys: every row has a type and a help text, and paths are unique", "[config][keys]") {
  std::vector<KeyHelp> rows = config_key_help();
  const std::vector<KeyHelp> policy = policy_key_help();
  rows.insert(rows.end(), policy.begin(), policy.end());
  std::set<std::string> paths;
  for (const KeyHelp& k : rows) {
    INFO(k.path);
    CHECK_FALSE(k.help.empty());
    CHECK_FALSE(k.type.empty());
    CHECK(paths.insert(k.path).second);
  }
  for (const char* p : {"optimizer.lr", "model.hidden", "data.path", "telemetry.histogram_steps",
                        "loss_scaler", "policy.fp8.margin", "policy.ops.OP.accumulation"})
    CHECK(paths.count(p) == 1);
  // The top-level names are the table's, in reading order.
  CHECK(config_keys().front() == "name");
}
