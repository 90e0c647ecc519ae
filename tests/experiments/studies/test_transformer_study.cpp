// The transformer study on its --quick config: every policy's run, its
// validation losses beside the FP64 shadow's, and the tables notebook 07 reads.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cmath>
#include <filesystem>

#include "rpsim/study/study.hpp"
#include "shared_data.hpp"
#include "study_csv.hpp"

using namespace rpsim;
using namespace rpsim::sim::study;

TEST_CASE("transformer --quick trains every policy and writes validation losses", "[study][transformer]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rpsim-study-transformer-" + std::to_string(::getpid()));
  StudyOptions options;
  options.quick = true;
  options.out_dir = dir;
  options.config =
      StudyConfig::load(rpsim::test::source_dir() / "experiments/configs/study-transformer.json", true);
  run_study(find_study("transformer"), options);

  const auto summary = rpsim::test::read_csv(dir / "summary.csv");
  REQUIRE(summary.rows.size() == 5);
  CHECK(summary.where("run", "fp16-amp")[0].at("loss_scaler") == "pytorch");
  CHECK(summary.where("run", "fp16-amp-noscale")[0].at("loss_scaler") == "none");
  CHECK(summary.where("run", "fp8")[0].at("policy") == "fp8");
  for (const auto& row : summary.rows) {
    INFO(row.at("run"));
    CHECK(row.at("steps") == "6");
    CHECK(std::isfinite(rpsim::test::number(row, "val_loss_emulated_nats")));
    CHECK(std::isfinite(rpsim::test::number(row, "val_loss_fp64_nats")));
  }
  // fp32 against its binary64 shadow: the same network to float rounding.
  const auto fp32 = summary.where("run", "fp32")[0];
  CHECK(rpsim::test::number(fp32, "val_loss_emulated_nats") ==
        Approx(rpsim::test::number(fp32, "val_loss_fp64_nats")).epsilon(1e-4));

  const auto evals = rpsim::test::read_csv(dir / "evaluations.csv");
  CHECK(evals.where("run", "bf16-amp").size() == 3);  // before step 0, after step 3, at the end
  const auto curves = rpsim::test::read_csv(dir / "curves.csv");
  CHECK(curves.where("run", "fp16-amp").size() == 6);
  std::filesystem::remove_all(dir);
}
