// The accuracy study (shared by fixed-point) with the FP64 shadow turned off,
// as a long run does: its shadow columns are NaN, not the trainer's -1.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "rpsim/study/study.hpp"
#include "shared_data.hpp"
#include "study_csv.hpp"

using namespace rpsim;
using namespace rpsim::sim::study;

TEST_CASE("accuracy without the shadow writes NaN shadow columns, not -1", "[study][accuracy]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rpsim-study-accuracy-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ifstream in(rpsim::test::source_dir() / "experiments/configs/study-accuracy.json");
  nlohmann::json c = nlohmann::json::parse(in);
  c["train"]["shadow"] = false;
  c["runs"] = nlohmann::json::array({c["runs"][0]});  // fp32 only
  c.erase("fp8_scaling_runs");
  const auto config_path = dir / "study-accuracy.json";
  std::ofstream(config_path) << c.dump();
  StudyOptions options;
  options.quick = true;
  options.out_dir = dir / "out";
  options.config = StudyConfig::load(config_path, true);
  run_study(find_study("accuracy"), options);

  const auto summary = rpsim::test::read_csv(dir / "out" / "summary.csv");
  REQUIRE(summary.rows.size() == 1);
  const auto& row = summary.rows[0];
  CHECK(rpsim::test::number(row, "test_accuracy_percent") > 0);
  CHECK(std::isnan(rpsim::test::number(row, "fp64_test_accuracy_percent")));
  CHECK(std::isnan(rpsim::test::number(row, "accuracy_gap_points")));
  const auto evals = rpsim::test::read_csv(dir / "out" / "evaluations.csv");
  REQUIRE(!evals.rows.empty());
  for (const auto& e : evals.rows) CHECK(std::isnan(rpsim::test::number(e, "fp64_test_accuracy_percent")));
  std::filesystem::remove_all(dir);
}
