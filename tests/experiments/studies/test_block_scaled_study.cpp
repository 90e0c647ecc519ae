// The block-scaled study on its --quick config: each policy's run beside its
// FP64 shadow, and the tables its notebook reads.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cmath>
#include <filesystem>

#include "rpsim/study/study.hpp"
#include "shared_data.hpp"
#include "study_csv.hpp"

using namespace rpsim;
using namespace rpsim::sim::study;

TEST_CASE("block-scaled --quick trains the GPT under each block-scaled policy beside its shadow",
          "[study][block-scaled]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rpsim-study-block-scaled-" + std::to_string(::getpid()));
  StudyOptions options;
  options.quick = true;
  options.out_dir = dir;
  options.config =
      StudyConfig::load(rpsim::test::source_dir() / "experiments/configs/study-block-scaled.json", true);
  run_study(find_study("block-scaled"), options);

  const auto summary = rpsim::test::read_csv(dir / "summary.csv");
  REQUIRE(summary.rows.size() == 6);
  for (const char* policy : {"bf16-amp", "fp8", "mxfp8", "mxfp6", "nvfp4", "mxfp4"}) {
    INFO(policy);
    REQUIRE(summary.where("run", policy).size() == 1);
    const auto row = summary.where("run", policy)[0];
    CHECK(row.at("policy") == policy);
    CHECK(row.at("steps") == "6");
    CHECK(std::isfinite(rpsim::test::number(row, "val_loss_emulated_nats")));
    CHECK(std::isfinite(rpsim::test::number(row, "val_loss_fp64_nats")));
    CHECK(std::isfinite(rpsim::test::number(row, "val_loss_gap_nats")));
  }
  // The 4-bit runs quantise differently from mxfp8: their losses differ.
  const auto val = [&](const char* run) {
    return rpsim::test::number(summary.where("run", run)[0], "val_loss_emulated_nats");
  };
  CHECK(val("nvfp4") != val("mxfp8"));
  CHECK(val("mxfp4") != val("mxfp8"));
  const auto evals = rpsim::test::read_csv(dir / "evaluations.csv");
  CHECK(evals.where("run", "nvfp4").size() == 3);  // before step 0, after step 3, at the end
  const auto curves = rpsim::test::read_csv(dir / "curves.csv");
  CHECK(curves.where("run", "mxfp4").size() == 6);
  std::filesystem::remove_all(dir);
}
