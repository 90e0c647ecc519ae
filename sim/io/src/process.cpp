#include "rpsim/io/process.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

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

}  // namespace rpsim::io
