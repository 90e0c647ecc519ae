// The native training steps of bench_train and bench_train_gpt compiled with
// -march=native (issue #30: the honest baseline is the fastest native step on
// this CPU, not the x86-64 baseline build with SSE2 Eigen kernels). A shared
// library with hidden visibility: its Eigen instantiations (AVX-512 code,
// 64-byte alignment) stay inside it and cannot be merged with the project's
// baseline-built ones, which the one-definition rule would otherwise allow.
#include "native_steps.h"

#include "../native_gpt.hpp"
#include "../native_mlp.hpp"

#define RPSIM_EXPORT __attribute__((visibility("default")))

extern "C" {

RPSIM_EXPORT double rpsim_bench_native_mlp_seconds(int batch, int steps, int repeats) {
  return bench_native::mlp_seconds_per_step(batch, steps, repeats);
}

RPSIM_EXPORT double rpsim_bench_native_gpt_seconds(int layers, int width, int heads, int context, int batch,
                                                   int vocabulary, int steps, int repeats) {
  const bench_native::Shape s{layers, width, heads, context, batch, vocabulary};
  return bench_native::gpt_seconds_per_step(s, steps, repeats);
}

RPSIM_EXPORT const char* rpsim_bench_native_flags(void) {
  return RPSIM_NATIVE_FLAGS;
}

}  // extern "C"
