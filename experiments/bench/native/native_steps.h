/* The native training steps built -march=native (native_steps.cpp), a C
 * interface so that the benchmarks and Python (ctypes, bench_train_torch.py)
 * can call them in their own process. CPU seconds per step, one thread. */
#ifndef RPSIM_BENCH_NATIVE_STEPS_H
#define RPSIM_BENCH_NATIVE_STEPS_H
#ifdef __cplusplus
extern "C" {
#endif

/* The 784-256-256-10 MLP, SGD with momentum, on `batch` rows. */
double rpsim_bench_native_mlp_seconds(int batch, int steps, int repeats);
/* The GPT of gpt-fp32.json's layout with the given shape, AdamW, clipping. */
double rpsim_bench_native_gpt_seconds(int layers, int width, int heads, int context, int batch,
                                      int vocabulary, int steps, int repeats);
/* The compiler flags the library was built with. */
const char* rpsim_bench_native_flags(void);

#ifdef __cplusplus
}
#endif
#endif
