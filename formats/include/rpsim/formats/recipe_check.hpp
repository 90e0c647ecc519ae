// Checks the recipe rows (recipe.hpp) against reference vectors in the
// layout of ../shared/recipes (README there): a header of `# key: value`
// lines whose `call:` names the reference's family, case shape and options,
// then one case per line (x, element codes, scales, NVFP4's amax, in
// hexadecimal). The recipe and its options come from the header; every
// output is compared bit for bit except where the references' conventions
// say otherwise (NaN compared as NaN, FP4 / FP6 codes of NaN-scaled MX blocks
// don't-care).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "rpsim/formats/recipe.hpp"

namespace rpsim {

struct RecipeFileCheck {
  std::filesystem::path file;
  std::string recipe;     // the row, e.g. te-nvfp4
  RecipeOptions options;  // as given to recipe_spec
  std::size_t passed = 0, failed = 0;
  std::vector<std::string> first_failures;  // "LINE: field[i] got G want W"
};

// One vector file. Throws std::invalid_argument naming the file (and line)
// for a header or line it cannot read, or a reference call no row
// reproduces; `show`: failures kept in first_failures.
RecipeFileCheck check_recipe_file(const std::filesystem::path& file, std::size_t show = 5);

// The vector files of `path`: the file itself, or a folder's *.txt files
// (not its subfolders), sorted by name. Throws std::invalid_argument when
// `path` is missing or a folder holds none.
std::vector<std::filesystem::path> recipe_files(const std::filesystem::path& path);

// The row and options that reproduce a header's `call:` JSON
// ({"family", "shape", "options"}); the shape goes to *rows, *cols.
// Throws std::invalid_argument naming the option no row has.
std::pair<std::string, RecipeOptions> recipe_for_call(const std::string& call_json, std::size_t* rows,
                                                      std::size_t* cols);

}  // namespace rpsim
