// Each subcommand of `rpsim` registers itself from its own file.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <stdexcept>
#include <string>

namespace rpsim::cli {

// Bad input from the user (file, field or value named in the message): exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A subcommand's action returns the process exit status.
using Action = std::function<int()>;
void add_explain(CLI::App& app, Action& action);
void add_testfloat(CLI::App& app, Action& action);

}  // namespace rpsim::cli
