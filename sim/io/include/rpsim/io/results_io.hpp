// Results are written atomically: to a temporary file beside the target,
// then renamed, so a reader (or an interrupted run) never sees half a CSV.
#pragma once

#include <unistd.h>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace rpsim::io {

class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Creates `dir` (and parents) and checks that a file can be created in it;
// throws IoError naming the directory otherwise. Call before any work.
inline void ensure_writable_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError("cannot create the output folder '" + dir.string() + "' (" + ec.message() + ")");
  const auto probe = dir / (".rpsim-write-test-" + std::to_string(::getpid()));
  std::ofstream out(probe);
  if (!out) throw IoError("cannot write in the output folder '" + dir.string() + "'");
  out.close();
  std::filesystem::remove(probe, ec);
}

// Writes `content` to `path` via `path.tmp.<pid>` + fsync-free rename (rename
// is atomic on POSIX file systems within one directory). A write that fails
// (a full disk, a file-size limit) removes the temporary and throws IoError
// naming `path`, the size and the system's reason: on a full disk it left a
// partial steps.csv.tmp.<pid> behind and named only that (results_io.cpp).
void write_atomic(const std::filesystem::path& path, const std::string& content);

// SIGINT/SIGTERM set a flag that long loops poll; they stop at a step
// boundary, write nothing partial, and say where they stopped.
inline std::atomic<bool>& interrupted() {
  static std::atomic<bool> flag{false};
  return flag;
}

// Thrown where a caller would otherwise go on with a run cut short by the
// flag (a study's training runs): nothing of the study is written, and the
// CLI exits 130 saying where it stopped.
class Interrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void install_interrupt_handler() {
  struct sigaction sa {};
  sa.sa_handler = [](int) { interrupted().store(true); };
  // SA_RESTART: a read or write under way when the signal lands (the gzip
  // pipe of a data set being loaded, a progress line to a piped stderr) goes
  // on instead of failing with EINTR; the loops see the flag at their next
  // step. Without it a study interrupted while loading Fashion-MNIST died of
  // "gzip failed" (exit 3) instead of stopping at step 0 (exit 130).
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace rpsim::io
