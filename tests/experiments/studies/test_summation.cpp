// The summation study: the facts it must reproduce, checked on its library
// functions and on the CSV tables of a --quick run.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cmath>
#include <filesystem>

#include "rpsim/formats/format.hpp"
#include "rpsim/study/summation.hpp"
#include "shared_data.hpp"
#include "study_csv.hpp"

using namespace rpsim;
using namespace rpsim::sim::study;

TEST_CASE("RNE recursive summation of ones stagnates at 2^p", "[study][summation]") {
  const ConstantSum fp16 = recursive_constant_sum(formats::binary16(), 1.0, 5000, RoundingMode::nearest_even);
  CHECK(fp16.stagnation_value == 2048.0);
  CHECK(fp16.stagnation_terms == 2048);
  CHECK(fp16.final_sum == 2048.0);
  const ConstantSum bf16 = recursive_constant_sum(formats::bfloat16(), 1.0, 5000, RoundingMode::nearest_even);
  CHECK(bf16.stagnation_value == 256.0);
  CHECK(bf16.stagnation_terms == 256);
  // Toward zero stagnates at the same point (2^p + 1 truncates back), and a
  // sum that has not reached it is exact.
  CHECK(recursive_constant_sum(formats::bfloat16(), 1.0, 1000, RoundingMode::toward_zero).final_sum == 256.0);
  const ConstantSum short_sum =
      recursive_constant_sum(formats::binary16(), 1.0, 1000, RoundingMode::nearest_even);
  CHECK(short_sum.final_sum == 1000.0);
  CHECK(short_sum.stagnation_terms == -1);
}

TEST_CASE("stochastically rounded sums of ones stay within the derived bound", "[study][summation]") {
  const Format& f = formats::bfloat16();
  const std::int64_t n = 100000;
  const StochasticSumBound b = stochastic_constant_sum_bound(f, 1.0, n, 32);
  CHECK(b.exact_sum == 1e5);
  // The fraction-free bound u^2/4 per step is the larger one.
  CHECK(b.sigma > 0);
  CHECK(b.sigma <= b.sigma_ulp2_4);
  // The bound must be tight enough to tell SR from RNE (256).
  CHECK(b.bound(6) < 1e5 - 256);
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const ConstantSum s = recursive_constant_sum(f, 1.0, n, RoundingMode::stochastic, seed);
    CHECK(s.stagnation_terms == -1);
    CHECK(std::abs(s.final_sum - b.exact_sum) <= b.bound(6));
  }
  // fp16: 10^5 ones overflow (65504 is the largest finite), 10^5 halves do not.
  const StochasticSumBound h = stochastic_constant_sum_bound(formats::binary16(), 0.5, n, 32);
  const ConstantSum s = recursive_constant_sum(formats::binary16(), 0.5, n, RoundingMode::stochastic, 7);
  CHECK(std::abs(s.final_sum - 5e4) <= h.bound(6));
}

TEST_CASE("summation --quick writes the tables the notebook reads", "[study][summation]") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rpsim-study-summation-" + std::to_string(::getpid()));
  StudyOptions options;
  options.quick = true;
  options.out_dir = dir;
  options.config =
      StudyConfig::load(rpsim::test::source_dir() / "experiments/configs/study-summation.json", true);
  run_study(find_study("summation"), options);

  const auto stagnation = rpsim::test::read_csv(dir / "stagnation.csv");
  REQUIRE(stagnation.where("format", "binary16").size() == 1);
  CHECK(rpsim::test::number(stagnation.where("format", "binary16")[0], "stagnation_value") == 2048);
  CHECK(rpsim::test::number(stagnation.where("format", "bfloat16")[0], "stagnation_value") == 256);

  const auto sr = rpsim::test::read_csv(dir / "sr_sums.csv");
  REQUIRE(!sr.rows.empty());
  bool fp16_1e5 = false;
  for (const auto& row : sr.rows) {
    CHECK(row.at("within_bound") == "true");
    CHECK(std::abs(rpsim::test::number(row, "error")) <= rpsim::test::number(row, "bound"));
    fp16_1e5 |= row.at("format") == "binary16" && row.at("terms") == "100000";
  }
  CHECK(fp16_1e5);

  const auto err = rpsim::test::read_csv(dir / "error_vs_n.csv");
  REQUIRE(!err.rows.empty());
  for (const auto& row : err.rows) {
    // Recursive and pairwise summation obey the deterministic bound.
    if (row.at("model").rfind("sequential", 0) == 0 || row.at("model").rfind("pairwise", 0) == 0) {
      INFO(row.at("model") << " n=" << row.at("n"));
      CHECK(rpsim::test::number(row, "relative_error") <= rpsim::test::number(row, "bound_gamma_n"));
    }
  }
  const auto meta = rpsim::test::read_json(dir / "meta.json");
  for (const char* field : {"config", "seed", "git_commit", "formats", "data_set", "wall_time_s"})
    CHECK(meta.contains(field));
  CHECK(meta.at("quick") == true);
  std::filesystem::remove_all(dir);
}
