// Where the oracles we did not write live (../shared); tests skip with a
// message when they are absent.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

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
