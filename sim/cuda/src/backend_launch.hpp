// Between the CUDA backend's host side (backend_*.cpp: names parsed, shapes
// checked, plans built, all in plain C++) and its kernels (backend_*.cu):
// plain argument structs and one launch function per kernel. Each launch
// queues its kernel on the stream and throws Failure (backend_host.hpp) when
// CUDA refuses it. Internal to sim/cuda.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rpsim/accumulation/accumulator_ops.hpp"
#include "rpsim/accumulation/schedule_fold.hpp"
#include "rpsim/accumulation/tensor_core_step.hpp"
#include "rpsim/cuda/backend.h"
#include "rpsim/formats/format_desc.hpp"
#include "rpsim/formats/recipe_block.hpp"
#include "rpsim/formats/scalar_core.hpp"

namespace rpsim::cuda::backend {

// A device matrix without its sizes: element (i, j) at data[i * rs + j * cs],
// dtype RPSIM_CUDA_F64 or RPSIM_CUDA_F32.
struct DMat {
  int dtype = RPSIM_CUDA_F64;
  void* data = nullptr;
  std::int64_t rs = 0, cs = 0;
};

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};

// torch._scaled_mm's scale_a (1x1 or Mx1) and scale_b (1x1 or 1xN); no data: 1.
struct TensorScaleView {
  DMat a, b;
  bool a_one = true, b_one = true;  // one value for the whole tensor
};

struct RoundArgs {
  FormatDesc fmt;
  RoundingDesc rnd;
  std::uint64_t seed = 0, stream_id = 0, first_index = 0;
  int in_dtype = RPSIM_CUDA_F64, out_dtype = RPSIM_CUDA_F64;
  const void* in = nullptr;
  void* out = nullptr;
  std::size_t n = 0;
};

struct QuantizeArgs {
  FormatDesc fmt;
  double scale = 1, max_finite = 0;
  int in_dtype = RPSIM_CUDA_F64, out_dtype = RPSIM_CUDA_F64;
  const void* in = nullptr;
  void* out = nullptr;
  std::size_t n = 0;
};

// A GEMM operand's block quantisation (backend_block.cu): recipe_block.hpp's
// groups, one thread per block. Outputs without data are not written.
struct BlockQuantizeArgs {
  QuantSpec spec;
  recipe::OperandGroups groups;
  recipe::Nvfp4TensorScale tensor{1.0f, 1.0f};
  bool stochastic = false;
  recipe::StochasticElements sr;
  DMat x, values, scales;
  std::uint8_t* codes = nullptr;  // row-major, groups.rows x groups.cols
};

// The block-FMA GEMM under a kernel schedule (backend_tc.cu).
constexpr int kTcTile = 16;       // output rows and columns per block
constexpr int kTcPositions = 64;  // plan positions per shared-memory tile (>= one step)
constexpr int kTcMaxSlices = 64;  // split-K slices one element folds

struct TcGemmArgs {
  sim::TcStep p;
  sim::FoldDesc fold;
  bool plain = true;    // one chunk, no scales: the chain's result is D
  bool c_first = true;  // C starts chunk 0's chain (else it joins in the epilogue)
  int slices = 1;
  GemmShape g;
  DMat a, b, c, d;
  TensorScaleView scales;
  // The plan (device arrays): order, begin (steps + 1), first / last (steps),
  // chunk_step (chunks + 1), chunk_slice (chunks), tile_step (tiles + 1).
  const int* order = nullptr;
  const int* begin = nullptr;
  const std::uint8_t* first = nullptr;
  const std::uint8_t* last = nullptr;
  const int* chunk_step = nullptr;
  const int* chunk_slice = nullptr;
  const int* tile_step = nullptr;
  int chunks = 0, tiles = 0;
  int positions = 0;  // order's length: the products one element's chain takes
  // A's rows and B's columns converted and decoded once, in plan order
  // (launch_tc_gemm's prepass): element (r, t) at r * positions + t.
  const double* a_value = nullptr;
  const int* a_exponent = nullptr;
  const double* b_value = nullptr;
  const int* b_exponent = nullptr;
  // The stored format converted to the instruction's input (kernel_schedule.hpp step 1).
  bool convert = false;
  FormatDesc input;
  RoundingMode input_rounding = RoundingMode::nearest_even;
};

// backend_round.cu
void launch_round(const RoundArgs& a, void* stream);
// *out = max |in[i]| with NaN skipped (amax's key kept in out's own bytes).
void launch_amax(int dtype, const void* in, std::size_t n, double* out, void* stream);
void launch_fp8_quantize(const QuantizeArgs& a, void* stream);

// backend_block.cu
void launch_block_quantize(const BlockQuantizeArgs& a, void* stream);

// backend_gemm.cu. C with no data: zeros.
void launch_sequential(const sim::AccumulatorOps& ops, GemmShape g, DMat a, DMat b, DMat c, DMat d,
                       void* stream);
void launch_native(GemmShape g, DMat a, DMat b, DMat c, DMat d, void* stream);  // a, b, d of one dtype
void launch_fma_chain(bool binary64, GemmShape g, DMat a, DMat b, DMat c, DMat d, void* stream);
void launch_block_scaled(const sim::TcStep& p, GemmShape g, DMat a, DMat b, DMat c, DMat d, DMat sfa,
                         DMat sfb, void* stream);
void launch_scaled_after(GemmShape g, DMat d, DMat c, const TensorScaleView& s, const FormatDesc& out,
                         void* stream);

// backend_tc.cu
void launch_tc_gemm(const TcGemmArgs& x, void* stream);

// The architectures the kernels were built for.
const char* built_architectures();

}  // namespace rpsim::cuda::backend
