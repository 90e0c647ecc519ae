// Text matrices (text_matrix.hpp).
#include "rpsim/io/text_matrix.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "rpsim/io/results_io.hpp"

namespace rpsim::io {

NumericArray read_text_matrix(const std::filesystem::path& path, bool finite_only) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw IoError("'" + path.string() + "' is a folder, not a file");
  std::ifstream in(path);
  if (!in) throw IoError("cannot open matrix file '" + path.string() + "'");
  const std::string name = path.string();
  NumericArray m;
  m.name = path.stem().string();
  m.dtype = "float64";
  std::size_t cols = 0, rows = 0, n = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++n;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::istringstream ss(line);
    std::string tok;
    std::size_t count = 0;
    while (ss >> tok) {
      std::size_t used = 0;
      double v = 0;
      try {
        v = std::stod(tok, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      const std::string where = name + ":" + std::to_string(n) + ": ";
      if (used != tok.size()) throw ArrayFileError(where + "'" + tok + "' is not a number");
      // An error against exact needs finite inputs; say so instead of printing NaN errors.
      if (finite_only && !std::isfinite(v)) throw ArrayFileError(where + "'" + tok + "' is not finite");
      m.values.push_back(v);
      ++count;
    }
    if (rows > 0 && count != cols)
      throw ArrayFileError(name + ":" + std::to_string(n) + ": " + std::to_string(count) +
                           " columns, but the first row has " + std::to_string(cols));
    cols = count;
    ++rows;
  }
  if (in.bad()) throw IoError("cannot read matrix file '" + name + "'");
  if (rows == 0) throw ArrayFileError("matrix file '" + name + "' is empty");
  m.shape = {rows, cols};
  return m;
}

}  // namespace rpsim::io
