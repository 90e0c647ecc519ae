// Whitespace-separated text matrices, one row per line ('#' starts a comment
// line), as `rpsim gemm --a/--b` and `rpsim gemm-check --format text` read them.
#pragma once

#include <filesystem>

#include "rpsim/io/npy.hpp"

namespace rpsim::io {

// The matrix in `path` as a 2-D float64 array named by the file's stem.
// Throws ArrayFileError naming the file and line (a token that is not a
// number, a ragged row, an empty file; with finite_only, NaN or infinity),
// IoError when the file cannot be read.
NumericArray read_text_matrix(const std::filesystem::path& path, bool finite_only);

}  // namespace rpsim::io
