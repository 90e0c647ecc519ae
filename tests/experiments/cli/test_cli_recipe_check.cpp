// `rpsim recipe-check FILE|DIR`: passed/total per file, the summary line,
// exit 0 / 1 / 2, on the excerpt of ../shared/recipes in tests/data/recipes
// and on the shared set itself when it is there.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "run_cli.hpp"

namespace fs = std::filesystem;
using rpsim::test::run_cli;

namespace {

fs::path excerpts() {
  return rpsim::test::source_dir() / "tests" / "data" / "recipes";
}

}  // namespace

TEST_CASE("recipe-check: passed/total per file and N passed, 0 failed on the excerpt", "[cli][recipes]") {
  const auto r = run_cli("recipe-check '" + excerpts().string() + "'");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output,
             Catch::Contains("8/8 te-d0067d0__fp8tensor__e5m2.txt (te-fp8-current element=e5m2 pow2=false)"));
  CHECK_THAT(r.output, Catch::Contains("te-aad3512__nvfp4__1x16.rowwise.txt (te-nvfp4") &&
                           Catch::Contains("formula=te-2026-02"));
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, std::regex("\n([0-9]+) passed, 0 failed\n$")));
  CHECK(std::stoi(m[1]) > 100);
}

TEST_CASE("recipe-check: a wrong output exits 1 with the mismatch, a missing path exits 2",
          "[cli][recipes]") {
  const fs::path dir = fs::temp_directory_path() / ("rpsim-recipe-check-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ifstream in(excerpts() / "te-d0067d0__fp8tensor__e5m2.txt");
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  const auto first = text.find("\n", text.rfind("# ")) + 1;  // the first case line
  const auto scale = text.find('\n', first) - 8;             // its scale_inv, the last field
  text.replace(scale, 8, "3f800000");
  std::ofstream(dir / "changed.txt") << text;
  const auto r = run_cli("recipe-check '" + (dir / "changed.txt").string() + "'");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("7/8 changed.txt") && Catch::Contains("mismatch: line") &&
                           Catch::Contains("s[0]") && Catch::Contains("7 passed, 1 failed"));
  const auto missing = run_cli("recipe-check '" + (dir / "none").string() + "'");
  CHECK(missing.status == 2);
  CHECK_THAT(missing.output, Catch::Contains("none: no such file or folder"));
  fs::remove_all(dir);
}

TEST_CASE("recipe-check ../shared/recipes: every file at 100%", "[cli][recipes]") {
  const fs::path dir = rpsim::test::shared_dir() / "recipes";
  if (!fs::is_directory(dir)) RPSIM_SKIP("no " << dir.string() << " (the shared recipe vectors)");
  const auto r = run_cli("recipe-check '" + dir.string() + "'");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains(" passed, 0 failed"));
  // Every file's line reads N/N.
  std::istringstream lines(r.output);
  std::size_t files = 0;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, std::regex("^([0-9]+)/([0-9]+) "))) continue;
    ++files;
    CHECK(m[1] == m[2]);
  }
  CHECK(files > 0);
}
