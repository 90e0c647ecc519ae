// `rpsim scaler` against trajectories derived by hand from upstream source
// (tests/data/scaler/README.md), plus its handling of bad input.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "run_cli.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;
using rpsim::test::run_cli;

namespace {

fs::path scaler_data() {
  return rpsim::test::source_dir() / "tests" / "data" / "scaler";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first line of every case is "# args: <options>".
std::string case_args(const fs::path& events) {
  std::ifstream in(events);
  std::string first;
  std::getline(in, first);
  const std::string prefix = "# args: ";
  REQUIRE(first.rfind(prefix, 0) == 0);
  return first.substr(prefix.size());
}

fs::path temp_file(const std::string& name, const std::string& content) {
  const fs::path p = fs::temp_directory_path() / ("rpsim-scaler-" + std::to_string(::getpid()) + "-" + name);
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

}  // namespace

TEST_CASE("rpsim scaler reproduces every hand-derived trajectory in tests/data/scaler", "[cli][scaler]") {
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(scaler_data())) {
    if (entry.path().extension() != ".events") continue;
    const fs::path events = entry.path();
    fs::path expected_csv = events;
    expected_csv.replace_extension(".csv");
    REQUIRE(fs::exists(expected_csv));
    const std::string args = case_args(events);
    INFO("case " << events.filename().string() << ": rpsim scaler " << args);
    const auto r = run_cli("scaler " + args + " --events '" + events.string() + "'");
    CHECK(r.status == 0);
    CHECK(r.output == slurp(expected_csv));
    ++cases;
  }
  CHECK(cases >= 15);
}

TEST_CASE("rpsim scaler: default PyTorch scaler first grows after 2000 clean steps", "[cli][scaler]") {
  std::string events;
  for (int i = 0; i < 2001; ++i) events += "0\n";
  const auto path = temp_file("2001-clean", events);
  const auto r = run_cli("scaler --policy pytorch --events '" + path.string() + "'");
  fs::remove(path);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("\n2000,65536,0\n2001,131072,0\n") != std::string::npos);
}

TEST_CASE("rpsim scaler --output writes the CSV to a file", "[cli][scaler]") {
  const auto in = temp_file("out-in", "0\n1\n");
  const auto out = fs::temp_directory_path() / ("rpsim-scaler-" + std::to_string(::getpid()) + "-out.csv");
  const auto r = run_cli("scaler --policy static --init-scale 2 --events '" + in.string() + "' -o '" +
                         out.string() + "'");
  CHECK(r.status == 0);
  CHECK(slurp(out) == "step,scale,skipped\n1,2,0\n2,2,1\n");
  fs::remove(in);
  fs::remove(out);
}

TEST_CASE("rpsim scaler rejects bad input with exit status 2 and a message naming it", "[cli][scaler]") {
  const auto good = temp_file("good", "0\n1\n");
  const std::string ev = " --events '" + good.string() + "'";

  SECTION("a line that is not 0 or 1 names file and line") {
    const auto bad = temp_file("bad", "# comment\n0\n1\n2\n");
    const auto r = run_cli("scaler --policy pytorch --events '" + bad.string() + "'");
    CHECK(r.status == 2);
    CHECK(r.output.find(bad.string() + ":4:") != std::string::npos);
    CHECK(r.output.find("'2'") != std::string::npos);
    fs::remove(bad);
  }
  SECTION("unknown policy") {
    const auto r = run_cli("scaler --policy bogus" + ev);
    CHECK(r.status == 2);
    CHECK(r.output.find("unknown loss scaler policy 'bogus'") != std::string::npos);
  }
  SECTION("negative and zero scale") {
    auto r = run_cli("scaler --policy pytorch --init-scale=-1" + ev);
    CHECK(r.status == 2);
    CHECK(r.output.find("init_scale") != std::string::npos);
    r = run_cli("scaler --policy static --init-scale 0" + ev);
    CHECK(r.status == 2);
    CHECK(r.output.find("init_scale") != std::string::npos);
  }
  SECTION("zero growth interval") {
    const auto r = run_cli("scaler --policy deepspeed --growth-interval 0" + ev);
    CHECK(r.status == 2);
    CHECK(r.output.find("growth_interval") != std::string::npos);
  }
  SECTION("a parameter the policy does not have") {
    const auto r = run_cli("scaler --policy keras --growth-factor 3" + ev);
    CHECK(r.status == 2);
    CHECK(r.output.find("growth_factor is not a parameter") != std::string::npos);
  }
  SECTION("missing event file") {
    const auto r = run_cli("scaler --policy pytorch --events /nonexistent/rpsim-events.txt");
    CHECK(r.status == 2);
    CHECK(r.output.find("/nonexistent/rpsim-events.txt") != std::string::npos);
  }
  fs::remove(good);
}

TEST_CASE("rpsim scaler: DeepSpeed --raise-at-min-scale stops like upstream, exit 2", "[cli][scaler]") {
  // init 4, min 1, hysteresis 1: 4 -> 2 -> 1, then the third overflow finds
  // cur_scale == min_scale and update_scale raises. The two steps before it are
  // printed; without the flag the run continues at 1.
  const auto events = temp_file("raise", "1\n1\n1\n0\n");
  const std::string base =
      "scaler --policy deepspeed --init-scale 4 --min-scale 1 --hysteresis 1 --events '" + events.string() +
      "'";
  auto r = run_cli(base + " --raise-at-min-scale");
  CHECK(r.status == 2);
  CHECK(r.output.find("step,scale,skipped\n1,4,1\n2,2,1\n") != std::string::npos);
  CHECK(r.output.find("3,") == std::string::npos);
  CHECK(r.output.find("step 3:") != std::string::npos);
  CHECK(r.output.find("Current loss scale already at minimum") != std::string::npos);
  r = run_cli(base);
  CHECK(r.status == 0);
  CHECK(r.output == "step,scale,skipped\n1,4,1\n2,2,1\n3,1,1\n4,1,0\n");
  fs::remove(events);
}

TEST_CASE("rpsim scaler --help says which scale the CSV's column is", "[cli][scaler]") {
  const auto r = run_cli("scaler --help");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("before the step's update") != std::string::npos);
}
