// Process-wide settings a front-end makes once, before any work.
#pragma once

namespace rpsim::io {

// glibc's malloc keeps freed memory instead of giving it back to the kernel:
// a training step frees and allocates tensors of the same sizes every step,
// and with glibc's defaults blocks over its mmap threshold and free space
// over its trim threshold went back to the kernel, then were faulted in
// again page by page (about 15% of an MLP step with its FP64 shadow,
// measured with bench_train). The peak the run reaches stays mapped until
// exit. Called by the rpsim binary and the training benchmarks, never by the
// libraries (the Python module leaves its host process's malloc alone).
void keep_freed_memory();

}  // namespace rpsim::io
