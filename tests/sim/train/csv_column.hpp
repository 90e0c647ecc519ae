// Shared by the run tests: one column of a CSV written by the trainer
// (steps.csv, evaluations.csv), as the strings written, so comparisons are
// byte for byte.
#pragma once

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace rpsim::sim::train::testing {

// Column `name` of every row of `csv`; fails the test when there is no such column.
inline std::vector<std::string> column(const std::string& csv, const std::string& name) {
  std::istringstream in(csv);
  std::string line, cell;
  std::getline(in, line);
  std::istringstream header(line);
  int index = -1, k = 0;
  while (std::getline(header, cell, ',')) {
    if (cell == name) index = k;
    ++k;
  }
  REQUIRE(index >= 0);
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    for (int c = 0; c <= index; ++c) std::getline(row, cell, ',');
    out.push_back(cell);
  }
  return out;
}

}  // namespace rpsim::sim::train::testing
