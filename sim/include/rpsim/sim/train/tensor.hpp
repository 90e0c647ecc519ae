// Tensors of the training simulator: binary64 matrices whose entries are
// exactly representable in the format the tensor currently lives in. binary64
// is only the carrier; every op rounds its result to the format the precision
// policy gives it, so the FP64 shadow is the same code under the fp64 policy.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <string>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim::train {

// Rows are samples of a batch, columns features (images flattened C,H,W).
using Matrix = Eigen::MatrixXd;

struct Tensor {
  Matrix values;
  const Format* format = nullptr;  // the format every entry is representable in
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

// Rounds every entry in place. Stochastic rounding needs `random`.
void round_in_place(const Format& fmt, Matrix& m, RoundingMode mode = RoundingMode::nearest_even,
                    RandomStream random = {});
Matrix rounded(const Format& fmt, const Matrix& m, RoundingMode mode = RoundingMode::nearest_even,
               RandomStream random = {});

// How the dot products inside a matmul are accumulated: products and running
// sums rounded to `format` after each step, in index order (sequential
// accumulation). binary32 runs on native float arithmetic, which is
// bit-identical to that model (products of binary16/bfloat16/FP8 inputs are
// exact in binary32; binary32 inputs get their product rounded, as on a
// unit without fused multiply-add). binary64 uses Eigen's blocked GEMM.
struct AccumulationModel {
  const Format* format = nullptr;
  std::string name() const;
};
// "fp32", "binary16", "sequential:fp32:rne", ... (only rne is supported here).
AccumulationModel parse_accumulation(const std::string& spec);

// C = A * B under `acc`, result left in the accumulation format (callers
// round it to the op's output format). Deterministic for any thread count.
Matrix matmul(const Matrix& a, const Matrix& b, const AccumulationModel& acc);

// Sum of `values` in index order with a rounding to `fmt` after each add.
double sequential_sum(const Format& fmt, const double* values, Eigen::Index count, Eigen::Index stride = 1);

}  // namespace rpsim::sim::train
