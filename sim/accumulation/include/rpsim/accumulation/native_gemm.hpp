// The native GEMMs: what sequential:binary32:rne and sequential:binary64:rne
// compute, at the speed of the hardware. sim::gemm takes them for those
// models (a zero C), and so does every caller of it: the trainer's matmul,
// FP8 block scaling's per-tile products, rpsim.gemm.
#pragma once

#include <optional>

#include <Eigen/Core>

namespace rpsim::sim::native {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic>;

// Which operand the caller passes transposed (the product is then A^T B or
// A B^T): the packing reads it in place.
enum class Transposed { none, a, b };

// C = A * B with every c(i, j) computed as acc = acc + a(i, p) * b(p, j) for
// p = 0, 1, ..., k - 1 from acc = +0, each product and each sum rounded to
// binary32: bit-identical to sim::gemm under sequential:binary32:rne (not
// fused) when every operand is a binary32 value. Nothing (std::nullopt) when
// some operand is not one (NaN aside): the float kernel would round it.
// Deterministic for any thread count (threads: at most that many; 0:
// OpenMP's default). short_values: the caller vouches that every operand is
// a binary32 value with at most 12 significant bits in [2^-62, 2^63), a zero,
// an infinity or a NaN (values of binary16 it rounded itself, short_format):
// the operands are not scanned, and the products take FMA.
std::optional<Matrix> matmul_binary32(const Matrix& a, const Matrix& b, Transposed t = Transposed::none,
                                      int threads = 0, bool short_values = false);

// What a scan of the n values from x finds, as bits: kNotBinary32, some
// value is not a binary32 value (a NaN counts as one: it converts as a
// NaN); kNotShort, some value is not short (nonzero with more than 12
// significant bits or outside [2^-62, 2^63); a NaN or an infinity is not
// short); kNaN, some value is a NaN. In the widest vectors this CPU has.
enum : int { kNotBinary32 = 1, kNotShort = 2, kNaN = 4 };
int scan_binary32(const double* x, Eigen::Index n);

// The same in binary64 (every operand is one): bit-identical to sim::gemm
// under sequential:binary64:rne, the FP64 shadow's GEMM.
Matrix matmul_binary64(const Matrix& a, const Matrix& b, Transposed t = Transposed::none, int threads = 0);

}  // namespace rpsim::sim::native
