// The rpsim binary's OpenMP threads sleep while they wait (issue #36): with
// libgomp's default spinning, the default thread count ran 5x slower than
// --threads 1 beside other processes. libgomp reports what it read at load
// time under OMP_DISPLAY_ENV=verbose; a user's own setting is kept.
#include <catch2/catch.hpp>
#include <string>

#include "run_cli.hpp"
#include "shared_data.hpp"

namespace {

// libgomp's GOMP_SPINCOUNT as rpsim's OpenMP runtime read it, with `env` (VAR=value ...) set.
std::string spin_count(const std::string& env) {
  const auto r =
      rpsim::test::run_shell("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + env + " OMP_DISPLAY_ENV=verbose " +
                             rpsim::test::rpsim_binary() + " explain 0.1 --format binary16");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto at = r.output.find("GOMP_SPINCOUNT = '");
  if (at == std::string::npos) return "";
  const auto start = at + 18;
  return r.output.substr(start, r.output.find('\'', start) - start);
}

}  // namespace

TEST_CASE("cli: OpenMP threads wait passively unless the user set the wait policy", "[cli][threads]") {
  const std::string unset = spin_count("");
  if (unset.empty())
    RPSIM_SKIP("skipped: the OpenMP runtime is not libgomp (no GOMP_SPINCOUNT under OMP_DISPLAY_ENV)");
  CHECK(unset == "0");  // was libgomp's 300000 spins
  CHECK(spin_count("OMP_WAIT_POLICY=active") == "30000000000");
  CHECK(spin_count("GOMP_SPINCOUNT=1000") == "1000");
}
