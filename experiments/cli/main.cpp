#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "commands.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/testfloat.hpp"
#include "rpsim/io/results_io.hpp"

namespace rpsim::cli {
std::vector<std::pair<std::string, AddCommand>>& registry() {
  static std::vector<std::pair<std::string, AddCommand>> r;
  return r;
}
Registrar::Registrar(const char* name, AddCommand add) {
  registry().emplace_back(name, add);
}
}  // namespace rpsim::cli

int main(int argc, char** argv) {
  CLI::App app{"rpsim: bit-exact simulation of reduced-precision arithmetic in deep learning"};
  app.require_subcommand(1);
  rpsim::cli::Action action;
  auto commands = rpsim::cli::registry();
  std::sort(commands.begin(), commands.end());
  for (const auto& [name, add] : commands) add(app, action);
  try {
    app.parse(argc, argv);
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
