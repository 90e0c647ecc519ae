// Runs the real `rpsim` binary and captures its exit status and output.
#pragma once

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <string>

#include "shared_data.hpp"

namespace rpsim::test {

struct CliResult {
  int status = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, stdout and stderr together.
inline CliResult run_shell(const std::string& command) {
  CliResult r;
  const std::string cmd = command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// `args` is appended to the binary path as-is (shell syntax).
inline CliResult run_cli(const std::string& args) {
  return run_shell(rpsim_binary() + " " + args);
}

}  // namespace rpsim::test
