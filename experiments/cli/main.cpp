#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/testfloat.hpp"
#include "rpsim/io/process.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/train/config_error.hpp"

namespace rpsim::cli {
std::vector<std::pair<std::string, AddCommand>>& registry() {
  static std::vector<std::pair<std::string, AddCommand>> r;
  return r;
}
Registrar::Registrar(const char* name, AddCommand add) {
  registry().emplace_back(name, add);
}
}  // namespace rpsim::cli

namespace {

// `rpsim help` and `rpsim help COMMAND` are `rpsim --help` and
// `rpsim COMMAND --help` (what a user types first, by analogy with git).
std::vector<std::string> arguments(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "help") {
    args.erase(args.begin());
    args.push_back("--help");
  }
  std::reverse(args.begin(), args.end());  // CLI11's order for parse(vector)
  return args;
}

// The command a user typed (`rpsim trian`, `rpsim help nope`) when it is
// none of `commands`: CLI11 said only "A subcommand is required" for the
// first and printed the full help with status 0 for the second.
std::string unknown_command(int argc, char** argv, const std::vector<std::string>& commands) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "help") args.erase(args.begin());
  if (args.empty() || args[0].empty() || args[0][0] == '-') return "";
  if (std::find(commands.begin(), commands.end(), args[0]) != commands.end()) return "";
  return fmt::format("unknown command '{}'{}; the commands: {} ('rpsim --help' describes them)", args[0],
                     rpsim::sim::train::did_you_mean(args[0], commands), fmt::join(commands, ", "));
}

}  // namespace

int main(int argc, char** argv) {
  rpsim::cli::restore_openmp_environment();  // libgomp has read it by now
  rpsim::io::keep_freed_memory();
  CLI::App app{"rpsim: bit-exact simulation of reduced-precision arithmetic in deep learning"};
  app.require_subcommand(1);
  app.footer("'rpsim help COMMAND' (or 'rpsim COMMAND --help') describes one command.");
  rpsim::cli::Action action;
  auto commands = rpsim::cli::registry();
  std::sort(commands.begin(), commands.end());
  for (const auto& [name, add] : commands) add(app, action);
  if (argc == 1) {  // no command: the list of them, not only "a subcommand is required"
    fmt::print(stderr, "{}", app.help());
    return 2;
  }
  std::vector<std::string> names;
  for (const auto& [name, add] : commands) names.push_back(name);
  if (const std::string unknown = unknown_command(argc, argv, names); !unknown.empty()) {
    fmt::print(stderr, "rpsim: error: {}\n", unknown);
    return 2;
  }
  try {
    auto args = arguments(argc, argv);
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    return action();
  } catch (const rpsim::io::Interrupted& e) {
    fmt::print(stderr, "rpsim: interrupted: {}\n", e.what());
    return 130;
  } catch (const rpsim::FormatError& e) {
    fmt::print(stderr, "rpsim: error: {}\n", e.what());
  } catch (const rpsim::testfloat::ParseError& e) {
    fmt::print(stderr, "rpsim: error: {}\n", e.what());
  } catch (const rpsim::cli::UsageError& e) {
    fmt::print(stderr, "rpsim: error: {}\n", e.what());
  } catch (const rpsim::io::IoError& e) {
    fmt::print(stderr, "rpsim: error: {}\n", e.what());
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "rpsim: error: {}\n", e.what());
  } catch (const std::exception& e) {
    fmt::print(stderr, "rpsim: internal error: {}\n", e.what());
    return 3;
  }
  return 2;
}
