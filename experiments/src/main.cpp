#include <fmt/format.h>

#include <cstdio>
#include <exception>

#include "commands.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/testfloat.hpp"

int main(int argc, char** argv) {
  CLI::App app{"rpsim: bit-exact simulation of reduced-precision arithmetic in deep learning"};
  app.require_subcommand(1);
  rpsim::cli::Action action;
  rpsim::cli::add_explain(app, action);
  rpsim::cli::add_testfloat(app, action);
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
  } catch (const rpsim::FormatError& e) {
    fmt::print(stderr, "rpsim: error: {}\n", e.what());
  } catch (const rpsim::testfloat::ParseError& e) {
    fmt::print(stderr, "rpsim: error: {}\n", e.what());
  } catch (const rpsim::cli::UsageError& e) {
    fmt::print(stderr, "rpsim: error: {}\n", e.what());
  }
  return 2;
}
