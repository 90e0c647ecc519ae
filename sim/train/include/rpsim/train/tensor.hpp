// Tensors of the training simulator: binary64 matrices whose entries are
// exactly representable in the format the tensor currently lives in. binary64
// is only the carrier; every op rounds its result to the format the precision
// policy gives it, so the FP64 shadow is the same code under the fp64 policy.
#pragma once

#include <Eigen/Core>
#include <cstdint>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/formats/array.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim::train {

// Rows are samples of a batch, columns features (images flattened C,H,W).
using Matrix = Eigen::MatrixXd;
using Mask = Eigen::Array<bool, Eigen::Dynamic, Eigen::Dynamic>;

struct Tensor {
  Matrix values;
  const Format* format = nullptr;  // the format every entry is representable in
  // Gradients: the entries that are zero because a rounding flushed them
  // (underflow): nonzero before the op that produced this tensor rounded its
  // result to its output and storage formats, zero after; elementwise ops
  // (activations, max pooling) pass on the flushed entries of their input
  // gradient. Empty: none.
  Mask flushed = Mask();
  std::int64_t underflow_count() const { return flushed.size() ? std::int64_t(flushed.count()) : 0; }
};

// Where stochastic rounding draws its bits: counter_random(seed, stream, i)
// for entry i, so the draw never depends on thread count or call order.
struct RandomStream {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
};

// Rounds one binary64 value to `fmt` and returns the value of the result.
// Round-to-nearest-even on formats with signed zeros and subnormals takes an
// arithmetic fast path (tests check it against round_double); everything
// else goes through the exact core.
double round_value(const Format& fmt, double x);
double round_value(const Format& fmt, double x, RoundingMode mode, std::uint64_t random_bits);

// round_value(fmt, .) as a callable prepared once per format and thread (the
// formats library's ValueRounding, inline for binary64 and binary32): what an
// element loop holds, where round_value would look the format up per call.
const ValueRounding& nearest_rounding(const Format& fmt);

// Rounds every entry in place. Stochastic rounding needs `random`.
void round_in_place(const Format& fmt, Matrix& m, RoundingMode mode, RandomStream random = {});
Matrix rounded(const Format& fmt, const Matrix& m, RoundingMode mode, RandomStream random = {});

// The same under the current thread's tensor rounding (ScopedTensorRounding):
// round to nearest even unless a scope says otherwise.
void round_in_place(const Format& fmt, Matrix& m);
Matrix rounded(const Format& fmt, const Matrix& m);
// Whether the current thread's tensor rounding is to nearest even (no
// scope, or a nearest one): each entry's cast then depends on it alone.
bool tensor_rounding_is_nearest();
// rounded(fmt, m) for a matrix whose entries are values of `held`: a copy
// when fmt holds every value of `held` (formats' holds) and the tensor
// rounding is to nearest -- the rounding would change no bit, and skipping
// it moves no stochastic stream (a cast of activations already in the
// compute format: a pass over memory saved).
Matrix rounded_from(const Format& fmt, const Matrix& m, const Format& held);
// The same on a matrix the caller gives up: m itself where nothing is to be
// rounded, else m rounded in place (no second matrix of its size).
Matrix rounded_from(const Format& fmt, Matrix&& m, const Format& held);

// Sets the mode of every tensor rounding that names none (op outputs,
// gradients, the casts in front of ops) for the current thread until the end
// of the scope: a policy's "rounding" for its forward and backward passes
// (Gupta et al. 2015 round every fixed-point result stochastically). Under a
// stochastic scope each rounding call draws from its own stream, derived
// from `base` and a count of the scope's calls, so no two tensors share
// random bits and the draws follow the order of calls, not the thread count.
class ScopedTensorRounding {
 public:
  ScopedTensorRounding(RoundingMode mode, RandomStream base);
  ~ScopedTensorRounding();
  ScopedTensorRounding(const ScopedTensorRounding&) = delete;
  ScopedTensorRounding& operator=(const ScopedTensorRounding&) = delete;

  struct State {
    RoundingMode mode = RoundingMode::nearest_even;
    RandomStream base;
    std::uint64_t calls = 0;
  };

 private:
  State saved_;
};

// C = A * B with the dot products accumulated under `model`, any of sim's
// accumulation models (accumulation.hpp: sequential, fma, pairwise,
// blocked, kahan, exact, tc:PRESET presets, eigen); the result is left in
// model.output_format() (callers round it to the op's output format).
// Deterministic for any thread count.
//
// Paths:
//  - sequential:binary32:rne (not fused) on operands that are all binary32
//    values: native float arithmetic, bit-identical to sim::gemm with that
//    model (products of binary16/bfloat16/FP8 values are exact in binary32,
//    binary32 products are rounded once; rpsim_sim is compiled with
//    -ffp-contract=off, so acc + a*b never becomes an FMA);
//  - sequential:binary64:rne (not fused; the FP64 shadow's): the same
//    kernel in binary64, bit-identical to sim::gemm;
//  - sequential:FMT:rne (not fused) on binary32 operands, FMT with signed
//    zeros, subnormals and at most 25 significand bits (binary16, bfloat16,
//    tf32, e5m2, e4m3, ...): binary64 arithmetic with the grid
//    rounding of round_value, bit-identical to sim::gemm (products exact in
//    binary64, double rounding of the sums innocuous since 53 >= 2*25 + 2);
//  - a Tensor Core model reads its input format: operands that are not
//    values of it are first rounded to it (nearest even), as the cast in
//    front of a tensor-core GEMM does (an fp32 GEMM on TF32 units, say);
//  - every other model (eigen:binary64 included): sim::gemm.
// `random` keys stochastic rounding: when it is not {0, 0}, a model that
// rounds stochastically gets its seed mixed with random.seed and
// random.stream, so each matmul of a run draws its own bits (sim::gemm then
// keys the output element and the term). With {0, 0} the model is used as
// given: matmul(a, b, m) equals sim::gemm(m, a, b).
// short_values: the caller rounded both operands to formats short_format
// accepts, so the native binary32 path neither scans them nor falls back.
Matrix matmul(const Matrix& a, const Matrix& b, const sim::AccumulationModel& model, RandomStream random = {},
              bool short_values = false);

// Whether every value of `fmt` is a binary32 value whose products with
// another such are exact in binary32 (at most 12 significant bits, zeros and
// magnitudes in [2^-62, 2^63), infinities, NaN): binary16, e4m3, e5m2, not
// bfloat16 (its range).
bool short_format(const Format& fmt);

// While one is alive, the multiply-adds of every matmul, matmul_tn and
// matmul_nt call (rows x inner x columns) on any thread are added up: what a forward pass
// really does, against which the model table's size column is tested.
// Not nested, not for concurrent runs.
class CountMultiplyAdds {
 public:
  CountMultiplyAdds();
  ~CountMultiplyAdds();
  CountMultiplyAdds(const CountMultiplyAdds&) = delete;
  CountMultiplyAdds& operator=(const CountMultiplyAdds&) = delete;
  double count() const;
};

// matmul(a^T, b) and matmul(a, b^T), the same bits: the native paths read the
// transposed operand in place (backward's x^T dy and dy w^T), the others are
// given the transpose as a matrix.
Matrix matmul_tn(const Matrix& a, const Matrix& b, const sim::AccumulationModel& model,
                 RandomStream random = {}, bool short_values = false);
Matrix matmul_nt(const Matrix& a, const Matrix& b, const sim::AccumulationModel& model,
                 RandomStream random = {}, bool short_values = false);

// Entries nonzero in `before` and zero in `after` (same shape): what the
// roundings that turned one into the other flushed to zero (NaN counts as
// nonzero).
Mask flushed_mask(const Matrix& before, const Matrix& after);
std::int64_t count_flushed(const Matrix& before, const Matrix& after);

// For the current thread until the end of the scope, every rounding is to
// binary64 (the FP64 shadow's step), which flushes nothing: flushed_mask
// gives all-false masks of the right shape and count_flushed 0 without
// reading the tensors (those passes were a tenth of a small GPT's shadow).
class ScopedNothingFlushed {
 public:
  ScopedNothingFlushed();
  ~ScopedNothingFlushed();
  ScopedNothingFlushed(const ScopedNothingFlushed&) = delete;
  ScopedNothingFlushed& operator=(const ScopedNothingFlushed&) = delete;

 private:
  bool saved_;
};

// Sum of `values` in index order with a rounding to `fmt` after each add.
double sequential_sum(const Format& fmt, const double* values, Eigen::Index count, Eigen::Index stride = 1);

}  // namespace rpsim::sim::train
