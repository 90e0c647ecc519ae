/* rpsim's CUDA backend: the emulator's arithmetic on device arrays, the same
 * bits as the CPU core (the per-element code is one definition, RPSIM_HD, that
 * both compile: formats/scalar_core.hpp, accumulation/tensor_core_step.hpp,
 * accumulator_ops.hpp, schedule_fold.hpp).
 *
 * A C interface over device pointers and a CUDA stream (a cudaStream_t passed
 * as void*; NULL is the legacy default stream), so no caller is compiled
 * against a framework's C++ ABI: the Python module hands it a torch tensor's
 * data_ptr() and torch.cuda.current_stream().cuda_stream as integers.
 *
 * Every function returns an rpsim_cuda_status code and, when `err` is not
 * NULL, fills it with the code and a message naming the bad argument. Work is
 * queued on the stream; a kernel's own failure surfaces at the next call or
 * synchronisation, as CUDA reports it. Arguments are checked before the
 * device is looked for, so a bad call says so even without a GPU.
 *
 * Names of formats, rounding modes and accumulation models are rpsim's own
 * (rpsim --help, rpsim.formats(), rpsim.accumulation_kinds()). */
#ifndef RPSIM_CUDA_BACKEND_H
#define RPSIM_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rpsim_cuda_status {
  RPSIM_CUDA_OK = 0,
  RPSIM_CUDA_NO_DEVICE = 1,    /* no CUDA device (or no driver) */
  RPSIM_CUDA_BAD_ARGUMENT = 2, /* a name, size, pointer or shape is wrong */
  RPSIM_CUDA_UNSUPPORTED = 3,  /* a valid model the backend does not run (the message says which) */
  RPSIM_CUDA_CUDA_ERROR = 4    /* the CUDA runtime failed (its message is quoted) */
};

typedef struct rpsim_cuda_error {
  int code;
  char message[512];
} rpsim_cuda_error;

/* Element types of device arrays. F64 / F32 hold values; U8 ... U64 hold the
 * encodings of a format (round's bits output). */
enum rpsim_cuda_dtype {
  RPSIM_CUDA_F64 = 0,
  RPSIM_CUDA_F32 = 1,
  RPSIM_CUDA_U8 = 2,
  RPSIM_CUDA_U16 = 3,
  RPSIM_CUDA_U32 = 4,
  RPSIM_CUDA_U64 = 5
};

/* The rounding of an array, as rpsim::ArrayOptions: element i (counted from
 * first_index) draws counter_random(seed, stream_id, first_index + i) under
 * stochastic rounding, so a chunked call gives one call's bits. */
typedef struct rpsim_cuda_rounding {
  const char* mode;       /* rne rna rtz rd ru rodd sr (or an alias); NULL: rne */
  const char* overflow;   /* NULL or "": the format's; "infinity", "nan", "saturate" */
  const char* nan_policy; /* NULL or "": x86; "x86", "arm", "riscv" */
  int flush_subnormal_inputs;
  int flush_subnormal_outputs;
  int stochastic_bits; /* 0: 32 */
  uint64_t seed, stream_id, first_index;
} rpsim_cuda_rounding;

/* A matrix on the device: element (i, j) at data[i * row_stride + j * col_stride]
 * (strides in elements, as torch's). dtype F32 or F64. */
typedef struct rpsim_cuda_matrix {
  int dtype;
  void* data;
  int64_t rows, cols;
  int64_t row_stride, col_stride;
} rpsim_cuda_matrix;

/* The scales of a scaled GEMM (rpsim::sim::GemmScales), each NULL-data when
 * absent: block scales sfa (M x K/block) and sfb (K/block x N) holding scale
 * values, for a block-scaled tc model; torch._scaled_mm's scale_a (1x1 or
 * Mx1) and scale_b (1x1 or 1xN) for a kernel schedule. */
typedef struct rpsim_cuda_gemm_scales {
  rpsim_cuda_matrix sfa, sfb, scale_a, scale_b;
} rpsim_cuda_gemm_scales;

/* The number of CUDA devices (0 without a device or driver: code
 * RPSIM_CUDA_NO_DEVICE with the runtime's reason). */
int rpsim_cuda_device_count(int* count, rpsim_cuda_error* err);

/* The architectures the kernels were built for, comma separated, e.g. "80-real,89-real,90a-real,100-real". */
const char* rpsim_cuda_architectures(void);

/* out[i] = in[i] rounded to `format`: the encodings (out_dtype U8 ... U64, wide
 * enough for the format) or the rounded values (F64, or F32 when every value of
 * the format is a binary32 value). in_dtype F64 or F32. The bits of
 * rpsim::round_to_bits / round_values with the same options. in and out may
 * be the same array when their dtypes match. */
int rpsim_cuda_round(const char* format, const rpsim_cuda_rounding* rounding, int in_dtype, const void* in,
                     int out_dtype, void* out, size_t n, void* stream, rpsim_cuda_error* err);

/* *amax_out (one double in device memory) = max |in[i]|, NaN elements
 * skipped, infinities kept, 0 for an empty or all-NaN array: Transformer
 * Engine's fmaxf(amax, fabsf(x)) reduction (rpsim fp8_scale). */
int rpsim_cuda_amax(int in_dtype, const void* in, size_t n, double* amax_out, void* stream,
                    rpsim_cuda_error* err);

/* Per-tensor FP8 quantisation (rpsim::sim::train::fp8_quantize): v =
 * binary32(in[i] * scale) to nearest even, clamped to the format's largest
 * finite magnitude when finite, then rounded to `format` to nearest even;
 * out[i] is that value (out_dtype F64 or F32). */
int rpsim_cuda_fp8_quantize(const char* format, double scale, int in_dtype, const void* in, int out_dtype,
                            void* out, size_t n, void* stream, rpsim_cuda_error* err);

/* Block quantisation of a GEMM operand as rpsim's trainer quantises it
 * (sim/train block_operand.cpp, formats/recipe_block.hpp): x (rows x cols, F64
 * or F32, read as binary32) under the recipe `recipe` with `options`
 * ("name=value,...", the names rpsim.recipes() lists; NULL or "": defaults),
 * rounded to nearest even, or stochastically with rounding->mode "sr".
 * - Under 1 x b blocks each row is one group, in blocks of b (the last one
 *   shorter); a matrix's columns are the rows of its transposed view (strides).
 *   Under b x b tiles (tile=16x16, tile=128x128) each tile is one group with
 *   one scale, read row by row.
 * - Group g (row major over the groups) draws counter_random(rounding->seed,
 *   mix64(rounding->stream_id ^ mix64(g)), k) for its k-th entry.
 * - NVFP4 takes the tensor's amax (tensor_amax: the caller's max |x|, NaN if
 *   any entry is) for its global scale; *tensor_scale_out (host memory, may be
 *   NULL) gets that scale, ges (1 for MX and FP8), which a GEMM's epilogue
 *   divides by.
 * - Outputs, each optional (NULL data) but at least one: values (F64, or F32
 *   except under FP8 block scaling: each element times its block's scale, what
 *   a GEMM multiplies), scales (F32 or F64: each entry's block decode scale),
 *   codes (U8 element encodings, row-major rows x cols).
 * Not on the device (RPSIM_CUDA_UNSUPPORTED): per-tensor recipes, columnwise,
 * rht, row_scaled and 4over6. */
int rpsim_cuda_block_quantize(const char* recipe, const char* options, const rpsim_cuda_matrix* x,
                              float tensor_amax, const rpsim_cuda_rounding* rounding,
                              const rpsim_cuda_matrix* values, const rpsim_cuda_matrix* scales,
                              uint8_t* codes, double* tensor_scale_out, void* stream, rpsim_cuda_error* err);

/* D = A B + C under the accumulation model `model` (a spec string:
 * sequential:FMT:RND[:seed=N], fma:binary32|binary64:rne, tc:..., kernel:...,
 * cublas:h100:...), the bits of rpsim::sim::gemm. A is M x K, B K x N, C and
 * D M x N (C with NULL data: zeros). A and B hold values of the model's input
 * format (a kernel schedule converts its stored format as the CPU does).
 * Stochastic rounding draws stream i*N + j for element (i, j). scales may be
 * NULL. */
int rpsim_cuda_gemm(const char* model, const rpsim_cuda_matrix* a, const rpsim_cuda_matrix* b,
                    const rpsim_cuda_matrix* c, const rpsim_cuda_matrix* d,
                    const rpsim_cuda_gemm_scales* scales, void* stream, rpsim_cuda_error* err);

#ifdef __cplusplus
}
#endif

#endif /* RPSIM_CUDA_BACKEND_H */
