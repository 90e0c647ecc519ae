// A sweep parses each run's config once, when it is read, and keeps the
// typed config that the runs and the plan use.
#include <catch2/catch.hpp>
#include <filesystem>

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
