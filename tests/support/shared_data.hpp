// Where the oracles we did not write live (../shared); tests skip with a
// message when they are absent.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

// Catch2 2.13 (Debian 12) has no SKIP(): a case whose data, tool or hardware
// is absent prints this marker and returns, and ctest reports it skipped, not
// passed (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt). Use it only where
// the case returns having checked nothing.
#define RPSIM_SKIP(message)                               \
  do {                                                    \
    std::cout << "[rpsim skip] " << message << std::endl; \
    return;                                               \
  } while (false)

namespace rpsim::test {

inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("RPSIM_SHARED")) return env;
  return RPSIM_SHARED_DIR;
}

inline std::filesystem::path source_dir() {
  return RPSIM_SOURCE_DIR;
}
inline std::string rpsim_binary() {
  return RPSIM_BINARY;
}

}  // namespace rpsim::test
