// A sweep parses each run's config once, when it is read, and keeps the
// typed config that the runs and the plan use.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "rpsim/config/config.hpp"
#include "rpsim/sweep/sweep.hpp"

using namespace rpsim::sim;

TEST_CASE("sweep: every run keeps its config parsed, equal to parsing its JSON again", "[sweep]") {
  const std::filesystem::path file =
      std::filesystem::path(RPSIM_SOURCE_DIR) / "experiments/configs/sweep-ci.json";
  const sweep::Sweep s = sweep::load(file);
  REQUIRE(s.runs.size() == 12);
  for (const sweep::Run& r : s.runs) {
    const train::Config again = config::parse_config(r.config);
    CHECK(r.parsed.name == r.id);
    CHECK(r.parsed.source == r.config);
    CHECK(r.parsed.policy.to_json() == again.policy.to_json());
    CHECK(r.parsed.optimizer.lr == again.optimizer.lr);
    CHECK(r.parsed.seed == again.seed);
    CHECK(r.parsed.loss_scaler->policy == again.loss_scaler->policy);
  }
  CHECK(s.runs.front().parsed.policy.base == "fp16-amp");
  CHECK(s.runs.back().parsed.policy.base == "bf16-amp");
  CHECK(s.runs.back().parsed.optimizer.lr == 0.1);
  CHECK(s.runs.back().parsed.seed == 1);
}

// Issue 25: a sweep's base (a file or an object) may extend a config file,
// resolved by the config layer's one function (config_file.hpp).
TEST_CASE("sweep: the base may extend a config file, named relative to its own file", "[sweep]") {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("rpsim-sweep-extends-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d / "base");
  const auto write = [](const std::filesystem::path& p, const std::string& text) {
    std::ofstream(p) << text;
  };
  write(d / "base" / "root.json", R"({"seed": 0, "policy": "fp32", "model": {"type": "mlp", "hidden": [8]},
    "data": {"name": "synthetic", "synthetic_train_size": 64, "synthetic_test_size": 32},
    "optimizer": {"type": "sgd", "lr": 0.05}, "batch_size": 16, "steps": 2})");
  write(d / "base" / "variant.json", R"({"extends": "root.json", "steps": 3})");
  write(d / "file.json", R"({"name": "f", "base": "base/variant.json", "grid": {"seed": [1, 2]}})");
  write(
      d / "object.json",
      R"({"name": "o", "base": {"extends": "base/variant.json", "batch_size": 32}, "grid": {"seed": [1]}})");
  const sweep::Sweep f = sweep::load(d / "file.json");
  REQUIRE(f.runs.size() == 2);
  CHECK(f.runs[0].parsed.steps == 3);
  CHECK(f.runs[1].parsed.seed == 2);
  CHECK_FALSE(f.runs[0].config.contains("extends"));
  const sweep::Sweep o = sweep::load(d / "object.json");
  REQUIRE(o.runs.size() == 1);
  CHECK(o.runs[0].parsed.steps == 3);
  CHECK(o.runs[0].parsed.batch_size == 32);
  CHECK(o.runs[0].parsed.optimizer.lr == 0.05);
  std::filesystem::remove_all(d);
}

// Issue #36: a grid over "steps" wrote the header run_id,seed,steps,steps,...
// (the grid's key and the steps each run trained); the results' column is
// result.steps then, and every column name is unique.
TEST_CASE("sweep: a grid key named like a result column leaves the header's names unique", "[sweep]") {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("rpsim-sweep-steps-" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  std::ofstream(d / "s.json") << R"({"name": "s", "base": {"seed": 0, "policy": "fp32",
    "model": {"type": "mlp", "hidden": [4]},
    "data": {"name": "synthetic", "synthetic_train_size": 32, "synthetic_test_size": 16},
    "optimizer": {"type": "sgd", "lr": 0.05}, "batch_size": 16},
    "grid": {"seed": [0], "steps": [1, 2]}})";
  sweep::Sweep s = sweep::load(d / "s.json");
  s.out_dir = d / "out";
  REQUIRE(s.runs.size() == 2);
  sweep::execute(s, sweep::shard(s, 0, 1), 1, nullptr);
  const std::string csv = sweep::merge(s);
  const std::string header = csv.substr(0, csv.find('\n'));
  CHECK(header.rfind("run_id,seed,steps,result.steps,skipped_steps,", 0) == 0);
  std::istringstream rows(csv);
  std::string line;
  std::getline(rows, line);
  std::getline(rows, line);
  CHECK(line.find(",0,1,1,0,") != std::string::npos);  // seed 0, grid steps 1, 1 step trained, 0 skipped
  std::filesystem::remove_all(d);
}
