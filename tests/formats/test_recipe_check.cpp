// recipe-check (recipe_check.hpp) on the excerpt of ../shared/recipes in
// tests/data/recipes (every family, its Inf/NaN twins, the lines where TE's
// two NVFP4 formulas differ), on the whole shared set when it is there, and
// on broken files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "rpsim/formats/recipe_check.hpp"
#include "shared_data.hpp"

using namespace rpsim;

namespace {

std::filesystem::path excerpts() {
  return test::source_dir() / "tests/data/recipes";
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `text` written to a file in the test's temporary folder.
std::filesystem::path scratch(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "rpsim-test-recipe-check";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name) << text;
  return dir / name;
}

std::string replace_first(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("recipe-check: every excerpt in tests/data/recipes passes", "[formats][recipes]") {
  const auto files = recipe_files(excerpts());
  CHECK(files.size() >= 15);
  for (const auto& f : files) {
    const RecipeFileCheck r = check_recipe_file(f);
    INFO(f.filename().string() << (r.first_failures.empty() ? "" : ": " + r.first_failures[0]));
    CHECK(r.passed > 0);
    CHECK(r.failed == 0);
  }
}

TEST_CASE("recipe-check: the te-2026-02 lines fail under te-2026-03, and a changed output fails its line",
          "[formats][recipes]") {
  // The excerpt's first 8 lines are where TE aad3512's formula gives other
  // scales than TE's head: read as the head's call, exactly those fail.
  const std::string old = read(excerpts() / "te-aad3512__nvfp4__1x16.rowwise.txt");
  const RecipeFileCheck head = check_recipe_file(
      scratch("head.txt", replace_first(old, "\"version\": \"aad3512\"", "\"version\": \"head\"")));
  CHECK(head.options.at("formula") == "te-2026-03");
  CHECK(head.failed == 8);
  CHECK(head.passed == 2);
  // One element code changed in the last line.
  std::string text = read(excerpts() / "te-d0067d0__fp8tensor__e5m2.txt");
  const auto last = text.rfind('\n', text.size() - 2) + 1;
  const auto q0 = last + 16 * 9;  // after the 16 inputs of 8 digits and a space
  text[q0] = text[q0] == '0' ? '1' : '0';
  const RecipeFileCheck changed = check_recipe_file(scratch("changed.txt", text));
  CHECK(changed.failed == 1);
  REQUIRE(changed.first_failures.size() == 1);
  CHECK_THAT(changed.first_failures[0], Catch::Contains("q[0]"));
}

TEST_CASE("recipe-check: bad files are named with their line", "[formats][recipes]") {
  CHECK_THROWS_WITH(recipe_files(excerpts() / "no-such-file.txt"), Catch::Contains("no such file"));
  CHECK_THROWS_WITH(check_recipe_file(scratch("nocall.txt", "# recipe: x\n00\n")),
                    Catch::Contains("nocall.txt") && Catch::Contains("no '# call: ' line"));
  CHECK_THROWS_WITH(
      check_recipe_file(
          scratch("family.txt", "# call: {\"family\": \"mx_ms\", \"shape\": [1, 2], \"options\": {}}\n")),
      Catch::Contains("family 'mx_ms'"));
  const std::string good = read(excerpts() / "te-d0067d0__fp8tensor__e5m2.txt");
  CHECK_THROWS_WITH(check_recipe_file(scratch("short.txt", good + "3f800000 00\n")),
                    Catch::Contains("short.txt:") && Catch::Contains("fields"));
  CHECK_THROWS_WITH(check_recipe_file(scratch(
                        "pow2.txt", replace_first(read(excerpts() / "te-d0067d0__nvfp4__1x16.rowwise.txt"),
                                                  "\"pow_2_scales\": false", "\"pow_2_scales\": true"))),
                    Catch::Contains("pow_2_scales"));
}

TEST_CASE("recipe-check: every file of ../shared/recipes at 100%", "[formats][recipes]") {
  const auto dir = test::shared_dir() / "recipes";
  if (!std::filesystem::is_directory(dir))
    RPSIM_SKIP("no " << dir.string() << " (the shared recipe vectors)");
  std::size_t passed = 0;
  for (const auto& f : recipe_files(dir)) {
    const RecipeFileCheck r = check_recipe_file(f);
    INFO(f.filename().string() << (r.first_failures.empty() ? "" : ": " + r.first_failures[0]));
    CHECK(r.passed > 0);
    CHECK(r.failed == 0);
    passed += r.passed;
  }
  CHECK(passed > 0);
}
