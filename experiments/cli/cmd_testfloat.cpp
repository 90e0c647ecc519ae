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
