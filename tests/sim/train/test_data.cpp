// The IDX reader (sim/train/src/data.cpp) under signals.
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "rpsim/train/data.hpp"

namespace fs = std::filesystem;
using namespace rpsim::sim::train;

namespace {

std::atomic<int> alarms{0};

}  // namespace

// CI caught a study interrupted while it loaded Fashion-MNIST dying of "gzip
// failed" (exit 3): the SIGINT ended the read of gzip's pipe with EINTR and the
// file came back short. The CLI's handler now restarts reads (SA_RESTART);
// this checks the reader itself against a handler that does not (Python's
// SIGINT handler is one): a timer's signals land throughout a gzipped read.
TEST_CASE("train: read_idx reads a gzipped file whole while signals interrupt its reads", "[train]") {
  const fs::path dir = fs::temp_directory_path() / ("rpsim-test-idx-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path plain = dir / "images-idx3-ubyte";
  // 4096 x 32 x 32 bytes, not compressible to nothing: gzip takes long enough
  // for many timer ticks.
  const std::uint32_t n = 4096, rows = 32, cols = 32;
  std::vector<std::uint8_t> data(std::size_t(n) * rows * cols);
  std::uint32_t x = 12345;
  for (auto& b : data) {
    x = x * 1664525u + 1013904223u;
    b = std::uint8_t(x >> 24);
  }
  {
    std::ofstream out(plain, std::ios::binary);
    const unsigned char header[4] = {0, 0, 0x08, 3};
    out.write(reinterpret_cast<const char*>(header), 4);
    for (std::uint32_t d : {n, rows, cols}) {
      const unsigned char be[4] = {std::uint8_t(d >> 24), std::uint8_t(d >> 16), std::uint8_t(d >> 8),
                                   std::uint8_t(d)};
      out.write(reinterpret_cast<const char*>(be), 4);
    }
    out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
  }
  REQUIRE(std::system(("gzip -f '" + plain.string() + "'").c_str()) == 0);
  const std::string gz = plain.string() + ".gz";

  struct sigaction sa {
  }, old{};
  sa.sa_handler = [](int) { alarms.fetch_add(1); };
  sa.sa_flags = 0;  // no SA_RESTART: reads under way fail with EINTR
  sigemptyset(&sa.sa_mask);
  REQUIRE(sigaction(SIGALRM, &sa, &old) == 0);
  itimerval every{{0, 100}, {0, 100}};  // every 100 us
  alarms = 0;
  setitimer(ITIMER_REAL, &every, nullptr);
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> got;
  int reads = 0;
  std::string error;
  // Several reads: each gives the signals a fresh chance to land mid-read.
  for (; reads < 5 && error.empty(); ++reads) {
    try {
      got = read_idx(gz, dims);
      if (got != data) error = "bytes differ";
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  sigaction(SIGALRM, &old, nullptr);
  fs::remove_all(dir);
  INFO(reads << " reads, " << alarms.load() << " signals");
  // The test means nothing unless the signals landed while it read.
  REQUIRE(alarms.load() > 10);
  CHECK(error.empty());
  CHECK(dims == std::vector<std::uint32_t>{n, rows, cols});
}
