#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "commands.hpp"
#include "rpsim/formats/testfloat.hpp"

namespace rpsim::cli {

namespace {

// TestFloat writes every operand with all the hex digits of its format
// (testfloat_gen pads to the width), so a first operand of another width is a
// file for another operation: f32_add on a file of 16-bit fields read every
// line as small binary32 patterns and reported thousands of failures.
void check_field_width(const testfloat::Operation& op, const std::string& file) {
  std::ifstream in(file);
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const auto begin = line.find_first_not_of(" \t\r");
    if (begin == std::string::npos) continue;
    const auto end = line.find_first_of(" \t\r", begin);
    const std::string field = line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    const std::size_t width = std::size_t(op.format->bits + 3) / 4;
    if (field.size() != width)
      throw UsageError(
          fmt::format("{}:{}: operand '{}' has {} hex digits; {} operands ({}) have {}: a file "
                      "for another operation?",
                      file, number, field, field.size(), op.name, op.format->name, width));
    return;
  }
}

void add_testfloat(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("testfloat", "Check Berkeley TestFloat vector lines (stdin or FILE)");
  auto op = std::make_shared<std::string>();
  auto rounding = std::make_shared<std::string>("rne");
  auto file = std::make_shared<std::string>();
  auto show = std::make_shared<std::size_t>(10);
  cmd->add_option("OP", *op,
                  "operation, TestFloat names: f16_add, f32_mulAdd, f64_to_f16, bf16_mul, e4m3_to_f32, ...")
      ->required();
  cmd->add_option("FILE", *file, "vector file (default: standard input)");
  cmd->add_option("-r,--rounding", *rounding, rounding_names(" ", true))->capture_default_str();
  cmd->add_option("--show", *show, "mismatches to print")->capture_default_str();
  cmd->callback([=, &action] {
    action = [=]() -> int {
      const testfloat::Operation operation = testfloat::parse_operation(*op);
      Rounding r;
      r.mode = parse_rounding(*rounding);
      if (r.mode == RoundingMode::stochastic)
        throw UsageError("--rounding sr: TestFloat vectors are for deterministic modes only");
      testfloat::Summary s;
      if (file->empty()) {
        s = testfloat::check_stream(operation, std::cin, "<stdin>", r, *show);
      } else {
        std::error_code ec;
        if (std::filesystem::is_directory(*file, ec))
          throw UsageError(fmt::format("vector file '{}' is a directory", *file));
        std::ifstream in(*file);
        if (!in)
          throw UsageError(fmt::format("cannot open vector file '{}': {}", *file, std::strerror(errno)));
        check_field_width(operation, *file);
        s = testfloat::check_stream(operation, in, *file, r, *show);
      }
      // A run that checked nothing must not read as a pass.
      if (s.passed + s.failed == 0)
        throw UsageError(fmt::format("no vectors in '{}'", file->empty() ? "<stdin>" : *file));
      if (operation.loose_nan)
        fmt::print("note: {} NaN results compared as NaN with the same sign (SoftFloat bf16 payload quirk)\n",
                   operation.name);
      for (const auto& line : s.first_failures) fmt::print("mismatch: {}\n", line);
      fmt::print("{} passed, {} failed\n", s.passed, s.failed);
      return s.failed == 0 ? 0 : 1;
    };
  });
}

const Registrar registered("testfloat", add_testfloat);
}  // namespace

}  // namespace rpsim::cli
