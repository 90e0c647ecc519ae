// Run metadata shared by `rpsim train`, studies and sweeps.
#include "rpsim/io/run_info.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace rpsim::io {

// RPSIM_SOURCE_DIR is set by CMake (an absolute path, unlike __FILE__ under
// ccache's base_dir, which makes it relative to the build folder).
std::string source_dir() {
  return RPSIM_SOURCE_DIR;
}

std::string git_commit() {
  const std::string cmd = "git -C '" + source_dir() + "' rev-parse HEAD 2>/dev/null";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    std::array<char, 128> buf{};
    while (fgets(buf.data(), int(buf.size()), p)) out += buf.data();
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (out.size() == 40) return out;
  if (const char* env = std::getenv("RPSIM_GIT_COMMIT")) return env;
  return "unknown";
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::array<char, 32> stamp{};
  std::strftime(stamp.data(), stamp.size(), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return stamp.data();
}

}  // namespace rpsim::io
