// Atomic result files when the write itself fails: a full disk (here a
// file-size limit, which fails the same write the same way without a
// mount) leaves no temporary beside the target, and the error names the
// target and the reason.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "rpsim/io/results_io.hpp"

namespace fs = std::filesystem;

TEST_CASE("write_atomic: a failed write leaves no file and names the target and the reason", "[io]") {
  const fs::path dir = fs::temp_directory_path() / ("rpsim-write-atomic-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path target = dir / "steps.csv";
  rpsim::io::write_atomic(target, "step\n0\n");  // it works while there is room
  // A write past RLIMIT_FSIZE fails with EFBIG once SIGXFSZ is ignored, as a
  // full disk fails with ENOSPC; the soft limit is restored below.
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &before) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 4096;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string message;
  try {
    rpsim::io::write_atomic(target, std::string(1 << 20, 'x'));
  } catch (const rpsim::io::IoError& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  CHECK_THAT(message, Catch::Contains("cannot write '" + target.string() + "' (1048576 bytes): "));
  CHECK_THAT(message, Catch::Contains("large"));  // strerror(EFBIG): "File too large"
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    INFO(entry.path());
    CHECK(entry.path() == target);  // the earlier whole file, no temporary
    ++files;
  }
  CHECK(files == 1);
  fs::remove_all(dir);
}
