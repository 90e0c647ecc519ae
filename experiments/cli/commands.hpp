// Each subcommand of `rpsim` registers itself from its own file:
//   static const rpsim::cli::Registrar reg("name", add_name);
// so that adding a command touches no shared file.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace rpsim::cli {

// Bad input from the user (file, field or value named in the message): exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A subcommand's action returns the process exit status.
using Action = std::function<int()>;
using AddCommand = void (*)(CLI::App& app, Action& action);

// For an unsigned option: CLI11 would read "-1" as 2^64-1 (explain --seed -1,
// gemm-check --show -1 printed every element).
inline CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return !text.empty() && text[0] == '-' ? "must be >= 0, got " + text : std::string();
      },
      "N>=0");
}

struct Registrar {
  Registrar(const char* name, AddCommand add);
};
// In registration order sorted by name, so `rpsim --help` is stable.
std::vector<std::pair<std::string, AddCommand>>& registry();

// Removes the OMP_WAIT_POLICY=PASSIVE that openmp_wait.cpp set before libgomp
// read it (when the user had set neither it nor GOMP_SPINCOUNT).
void restore_openmp_environment();

}  // namespace rpsim::cli
