// rpsim recipe-check FILE|DIR: the recipe rows (formats/recipe.hpp) against
// reference vector files in ../shared/recipes's layout, the recipe and its
// options read from each file's header.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "commands.hpp"
#include "rpsim/formats/recipe_check.hpp"

namespace rpsim::cli {

namespace {

std::string options_text(const RecipeOptions& options) {
  std::string s;
  for (const auto& [k, v] : options) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
  return s;
}

void add_recipe_check(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "recipe-check",
      "Check the quantisation recipes against reference vectors (a file or a folder of *.txt)");
  auto path = std::make_shared<std::string>();
  auto show = std::make_shared<std::size_t>(3);
  cmd->add_option("PATH", *path, "vector file, or a folder of them (../shared/recipes)")->required();
  cmd->add_option("--show", *show, "mismatches to print per file")
      ->capture_default_str()
      ->check(non_negative());
  cmd->callback([=, &action] {
    action = [=]() -> int {
      std::size_t passed = 0, failed = 0;
      for (const auto& file : recipe_files(*path)) {
        const RecipeFileCheck r = check_recipe_file(file, *show);
        fmt::print("{}/{} {} ({} {})\n", r.passed, r.passed + r.failed, file.filename().string(), r.recipe,
                   options_text(r.options));
        for (const auto& f : r.first_failures) fmt::print("  mismatch: {}\n", f);
        passed += r.passed;
        failed += r.failed;
      }
      // A run that checked nothing must not read as a pass.
      if (passed + failed == 0) throw UsageError(fmt::format("no vector lines in '{}'", *path));
      fmt::print("{} passed, {} failed\n", passed, failed);
      return failed == 0 ? 0 : 1;
    };
  });
}

const Registrar registered("recipe-check", add_recipe_check);

}  // namespace

}  // namespace rpsim::cli
