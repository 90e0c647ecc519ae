// `rpsim grads` on the shared ResNet-18 dump (../shared/grads-h100, skipped
// with a message when absent) and on files that are not array files.
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

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path fresh_dir(const char* name) {
  const fs::path d = fs::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST_CASE("cli: rpsim grads on the shared ResNet-18 dump") {
  const fs::path dump = rpsim::test::shared_dir() / "grads-h100" / "resnet18_step200.npz";
  if (!fs::exists(dump)) {
    RPSIM_SKIP("skipped: " << dump << " is absent (shared data)");
  }
  const fs::path out = fresh_dir("rpsim-grads");
  const auto g =
      run_cli("grads " + dump.string() +
              " --formats binary16,e4m3 --min-log2-scale 0 --max-log2-scale 4 --out " + out.string());
  INFO(g.output);
  REQUIRE(g.status == 0);
  const std::string fractions = slurp(out / "fractions.csv");
  CHECK(fractions.rfind("tensor,format,log2_scale,", 0) == 0);
  CHECK(fractions.find("act_grad/") != std::string::npos);
  CHECK(fractions.find("param_grad/") != std::string::npos);
  CHECK(fractions.find(",e4m3,4,16,") != std::string::npos);
  const std::string hist = slurp(out / "histogram.csv");
  CHECK(hist.find(",zero,") != std::string::npos);
  const std::string range = slurp(out / "scale_range.csv");
  CHECK(range.find("binary16,act_grad,1,") != std::string::npos);
  CHECK(g.output.find("binary16") != std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("cli: rpsim grads names a file that is not an array file and exits 2") {
  const fs::path dir = fresh_dir("rpsim-grads-bad");
  const fs::path bad = dir / "not-an-archive.npz";
  std::ofstream(bad) << "hello";
  const auto r = run_cli("grads " + bad.string() + " --out " + (dir / "out").string());
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("not-an-archive.npz") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out" / "fractions.csv"));
  const auto f = run_cli("grads " + bad.string() + " --formats e9m99 --out " + (dir / "out").string());
  CHECK(f.status == 2);
  CHECK(f.output.find("e9m99") != std::string::npos);
  fs::remove_all(dir);
}

// Issue 26: NaN and infinity were reported as "overflow nothing", tensors
// without a group prefix were lumped in silently, and an all-zero or empty
// tensor gave "nan% of non-zero values underflow".
TEST_CASE("cli: rpsim grads says what it counted: non-finite values, ungrouped names, no non-zero value") {
  const fs::path data = rpsim::test::source_dir() / "tests" / "data" / "grads";
  const fs::path out = fresh_dir("rpsim-grads-findings");
  auto r = run_cli("grads " + (data / "nonfinite_ungrouped.npz").string() + " --out " + (out / "a").string() +
                   " 2>&1");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output,
             Catch::Contains("non-finite: 2 NaN or infinite values in 1 tensor(s) ('act_grad/fc1')"));
  CHECK_THAT(r.output,
             Catch::Contains("ungrouped: 1 tensor(s) named without act_grad/ or param_grad/ ('loose')"));
  r = run_cli("grads " + (data / "all_zero_and_empty.npz").string() + " --out " + (out / "b").string() +
              " 2>&1");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("no non-zero finite value to lose"));
  CHECK_THAT(r.output, !Catch::Contains("nan%"));
  fs::remove_all(out);
}
