// Process-wide settings a front-end makes once, before any work.
#pragma once

#include <string>

namespace rpsim::io {

// glibc's malloc keeps freed memory instead of giving it back to the kernel:
// a training step frees and allocates tensors of the same sizes every step,
// and with glibc's defaults blocks over its mmap threshold and free space
// over its trim threshold went back to the kernel, then were faulted in
// again page by page (about 15% of an MLP step with its FP64 shadow,
// measured with bench_train; about half of an emulated fp16-amp conv GEMM's
// backward through rpsim.torch, 8192x144 by 144x16: 29 ms -> 16 ms). The peak
// the run reaches stays mapped until exit. Called by the front-ends that run
// a training loop (the rpsim binary, the training benchmarks,
// rpsim.torch.Trainer and rpsim.train; a user's own loop calls
// rpsim.keep_freed_memory()), never by the libraries: importing the Python
// module leaves its host process's malloc alone.
void keep_freed_memory();

}  // namespace rpsim::io

namespace rpsim::io {

// The largest thread count a front-end accepts: 4 per core this machine has
// (at least 16). OpenMP starts every thread it is asked for, each with its
// own stack: --threads 100000 ran out of memory in the runtime (SIGSEGV) and
// 20000 hung, while past the core count threads only share the same cores.
int max_threads();

// `threads` for the option or argument named `what` ("--threads"): 0 is the
// OpenMP default where `zero_is_default`, otherwise at least 1; at most
// max_threads(). Throws std::invalid_argument naming `what` and the value.
void check_threads(int threads, const std::string& what, bool zero_is_default);

}  // namespace rpsim::io
