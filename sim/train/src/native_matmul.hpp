// The trainer's native GEMMs (internal to sim/train): what
// sequential:binary32:rne and sequential:binary64:rne compute, at the speed
// of the hardware.
#pragma once

#include <optional>

#include "rpsim/train/tensor.hpp"

namespace rpsim::sim::train::detail {

// Which operand the caller passes transposed (the product is then A^T B or
// A B^T): the packing reads it in place.
enum class Transposed { none, a, b };

// C = A * B with every c(i, j) computed as acc = acc + a(i, p) * b(p, j) for
// p = 0, 1, ..., k - 1 from acc = +0, each product and each sum rounded to
// binary32: bit-identical to sim::gemm under sequential:binary32:rne (not
// fused) when every operand is a binary32 value. Nothing (std::nullopt) when
// some operand is not one (NaN aside): the float kernel would round it.
// Deterministic for any thread count.
std::optional<Matrix> matmul_native_binary32(const Matrix& a, const Matrix& b,
                                             Transposed t = Transposed::none);

// The same in binary64 (every operand is one): bit-identical to sim::gemm
// under sequential:binary64:rne, the FP64 shadow's GEMM.
Matrix matmul_native_binary64(const Matrix& a, const Matrix& b, Transposed t = Transposed::none);

}  // namespace rpsim::sim::train::detail
