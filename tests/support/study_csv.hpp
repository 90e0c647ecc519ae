// Reads the CSV tables and meta.json that `rpsim study` writes, for tests
// that check the facts a study must reproduce.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace rpsim::test {

struct CsvFile {
  std::vector<std::string> columns;
  std::vector<std::map<std::string, std::string>> rows;

  // Rows whose `column` equals `value` (every row if column is empty).
  std::vector<std::map<std::string, std::string>> where(const std::string& column,
                                                        const std::string& value) const {
    std::vector<std::map<std::string, std::string>> out;
    for (const auto& r : rows)
      if (column.empty() || r.at(column) == value) out.push_back(r);
    return out;
  }
};

inline std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"')
        cell += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        cell += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.push_back(cell), cell.clear();
    } else {
      cell += c;
    }
  }
  cells.push_back(cell);
  return cells;
}

inline CsvFile read_csv(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  CsvFile f;
  std::string line;
  if (!std::getline(in, line)) throw std::runtime_error("empty CSV " + path.string());
  f.columns = split_csv_line(line);
  while (std::getline(in, line)) {
    const auto cells = split_csv_line(line);
    if (cells.size() != f.columns.size())
      throw std::runtime_error("ragged row in " + path.string() + ": " + line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < cells.size(); ++i) row[f.columns[i]] = cells[i];
    f.rows.push_back(std::move(row));
  }
  return f;
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return nlohmann::json::parse(in);
}

inline double number(const std::map<std::string, std::string>& row, const std::string& column) {
  return std::strtod(row.at(column).c_str(), nullptr);
}

}  // namespace rpsim::test
