#include "rpsim/io/process.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace rpsim::io {

void keep_freed_memory() {
#if defined(__GLIBC__)
  // Fixed thresholds also switch off glibc's dynamic adjustment of them.
  // 32 MiB: the largest mmap threshold glibc accepts on 64-bit (a larger
  // value is refused); tensors above it are few and long-lived (data sets).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

int max_threads() {
  const unsigned cores = std::thread::hardware_concurrency();
  return std::max(16, 4 * int(cores));
}

void check_threads(int threads, const std::string& what, bool zero_is_default) {
  const int low = zero_is_default ? 0 : 1;
  if (threads < low)
    throw std::invalid_argument(what + " " + std::to_string(threads) + ": must be at least " +
                                std::to_string(low) + (zero_is_default ? " (0: OpenMP's default)" : ""));
  if (threads > max_threads())
    throw std::invalid_argument(what + " " + std::to_string(threads) + ": at most " +
                                std::to_string(max_threads()) + " (4 per core of this machine's " +
                                std::to_string(std::thread::hardware_concurrency()) + ")");
}

}  // namespace rpsim::io
