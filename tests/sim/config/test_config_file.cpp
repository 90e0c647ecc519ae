// "extends" is resolved by the config layer's one function (config_file.hpp)
// for training configs (rpsim train, the Python module), sweep bases and
// study configs alike.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "rpsim/config/config_file.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/config/study_config.hpp"

using namespace rpsim::sim::config;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

fs::path scratch() {
  const fs::path d = fs::temp_directory_path() / ("rpsim-config-file-" + std::to_string(::getpid()));
  fs::create_directories(d / "sub");
  return d;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

const char* kBase = R"({
  "name": "base-run", "seed": 3, "policy": "fp16-amp", "model": {"type": "mlp", "hidden": [8, 8]},
  "data": {"name": "synthetic", "synthetic_train_size": 64, "synthetic_test_size": 32},
  "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9}, "batch_size": 16, "steps": 2})";

std::string error_of(const fs::path& file) {
  try {
    (void)read_config_file(file).parse();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("config files: a training config extends a base as a merge patch", "[config][extends]") {
  const fs::path d = scratch();
  write(d / "base.json", kBase);
  write(d / "sub" / "middle.json", R"({"extends": "../base.json", "optimizer": {"momentum": null}})");
  write(d / "variant.json", R"({"extends": "sub/middle.json", "model": {"hidden": [4]}, "steps": 3})");
  const LoadedConfig l = read_config_file(d / "variant.json", {"seed=5"});
  const Config c = l.parse();
  CHECK(c.name == "variant");  // its own stem, not the base's folder
  CHECK(c.seed == 5);          // --set applies after the chain
  CHECK(c.model.hidden == std::vector<int>{4});
  CHECK(c.steps == 3);
  CHECK(c.policy.name == "fp16-amp");
  CHECK(c.optimizer.lr == 0.1);
  CHECK(c.optimizer.momentum == 0);  // null removed the base's 0.9
  CHECK_FALSE(l.config.contains("extends"));
  // A variant that names itself keeps its name.
  write(d / "named.json", R"({"extends": "base.json", "name": "mine"})");
  CHECK(read_config_file(d / "named.json").parse().name == "mine");
  // The base file read alone is unchanged.
  CHECK(read_config_file(d / "base.json").parse().name == "base-run");
  fs::remove_all(d);
}

TEST_CASE("config files: extends errors name the file and the field", "[config][extends]") {
  const fs::path d = scratch();
  write(d / "number.json", R"({"extends": 3})");
  CHECK(error_of(d / "number.json") ==
        (d / "number.json").string() + ": extends: expected a config file name, got 3");
  write(d / "missing.json", R"({"extends": "no-such-base.json"})");
  const std::string m = error_of(d / "missing.json");
  CHECK_THAT(m, Catch::StartsWith((d / "missing.json").string() + ": extends: ") &&
                    Catch::Contains("no-such-base.json: cannot open"));
  write(d / "loop.json", R"({"extends": "loop.json"})");
  CHECK_THAT(error_of(d / "loop.json"), Catch::Contains("extends: nests more than 8 deep"));
  // A key the base does not know is still checked after the merge.
  write(d / "base.json", kBase);
  write(d / "typo.json", R"({"extends": "base.json", "optimiser": {"lr": 1}})");
  CHECK_THAT(error_of(d / "typo.json"),
             Catch::StartsWith((d / "typo.json").string() + ": optimiser: unknown key"));
  fs::remove_all(d);
}

TEST_CASE("config files: JSON from no file and study configs resolve extends the same way",
          "[config][extends]") {
  const fs::path d = scratch();
  write(d / "base.json", kBase);
  // A dict (the Python module's) names its base relative to the working folder; an absolute name works
  // anywhere.
  const json dict = {{"extends", (d / "base.json").string()}, {"steps", 1}};
  const Config c = read_config_json(dict, "config dict").parse();
  CHECK(c.steps == 1);
  CHECK(c.seed == 3);
  json expected = read_config_tree(d / "base.json");
  expected["steps"] = 1;
  CHECK(resolve_extends(dict, "") == expected);
  write(d / "study.json", R"({"seed": 1, "quick": {"seed": 2}, "n": 4})");
  write(d / "sub" / "study-variant.json", R"({"extends": "../study.json", "n": 5})");
  const StudyConfig s = StudyConfig::load(d / "sub" / "study-variant.json", true);
  CHECK(s.integer("seed") == 2);
  CHECK(s.integer("n") == 5);
  try {
    (void)s.string("n");
    FAIL("an integer read as a string");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) ==
          (d / "sub" / "study-variant.json").string() + ": n: expected a string, got 5");
  }
  // A variant may set only the fields its study's own config has: every unknown one at once.
  write(d / "typo.json", R"({"extends": "study.json", "sed": 3, "colour": "red"})");
  const StudyConfig reference = StudyConfig::load(d / "study.json", false);
  StudyConfig::load(d / "sub" / "study-variant.json", false).check_fields(reference);  // no throw
  try {
    StudyConfig::load(d / "typo.json", false).check_fields(reference);
    FAIL("unknown fields accepted");
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::StartsWith((d / "typo.json").string() + ": 2 problems:"));
    CHECK_THAT(m, Catch::Contains("sed: unknown key (did you mean seed?)") &&
                      Catch::Contains("colour: unknown key"));
  }
  fs::remove_all(d);
}
