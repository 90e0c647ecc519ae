// FP8 tensor scaling of matmul inputs.
#pragma once

#include <cstdint>

#include "rpsim/train/layers/layer.hpp"

namespace rpsim::sim::train {

// FP8 helpers, exposed for tests. The per-tensor scale for this use of a
// tensor, by sim/scaling's Transformer Engine rules: delayed scaling uses the
// scale computed from earlier uses' amaxes (1 on the first use, the previous
// scale kept when the history's amax is zero or not finite), then records
// this tensor's amax and updates; current scaling uses this tensor's amax
// (1 when it is zero or not finite). `stats`, when given, gets this tensor's
// amax and the scale returned.
double fp8_scale(const Matrix& x, const Format& f, const Fp8Recipe& recipe, Fp8ScaleState& state,
                 Fp8Stats* stats = nullptr);
// x * scale computed in binary32, clamped to the format's range and rounded;
// `stats`, when given, counts the entries, the saturated and the flushed.
Matrix fp8_quantize(const Matrix& x, const Format& f, double scale, Fp8Stats* stats = nullptr);
// Block-scaled quantisation of a GEMM input under a block-scaled recipe:
// formats' mx_quantize (OCP MX: E8M0 scale per block) or nvfp4_quantize
// (E4M3 scale per block under the tensor's FP32 scale from its amax; the
// element format must be e2m1) on each line of `x`, blocks of
// recipe.block_size along `axis` (1: along a row, 0: down a column), or with
// `tiles` on each block_size x block_size tile (one scale per tile). `sr`
// set: elements rounded stochastically, group g (line or tile, row-major)
// keyed by (sr->seed, mix64(sr->stream ^ mix64(g))). Returns each element
// times its block's decoding scale (what a block-scaled MMA multiplies, exact
// in binary32); *tensor_scale, when given, gets NVFP4's per-tensor encoding
// scale s_enc (1 for MX), so x ~ result / s_enc: the GEMM epilogue divides
// by it, as for per-tensor FP8 (detail::dequantize). `stats`, when given, takes the amax, the range
// of the block scales (1 / decode scale, as a per-tensor scale multiplies)
// over blocks with a nonzero finite scale, and the counts, added to what it holds.
// `scales`, when given, gets each entry's block scale (the result divided by
// it is the element: block_gemm.hpp).
struct BlockLayout {
  int axis = 1;
  bool tiles = false;
  const RandomStream* sr = nullptr;
};
Matrix block_quantize(const Matrix& x, const Format& f, const Fp8Recipe& recipe, const BlockLayout& layout,
                      Fp8Stats* stats = nullptr, double* tensor_scale = nullptr, Matrix* scales = nullptr);
// block_quantize under OCP MX with E8M0 scales in 1D blocks of `block`.
Matrix mx_quantize(const Matrix& x, const Format& f, int block, int axis, Fp8Stats* stats = nullptr);

// The n x n random Hadamard transform T = H diag(s) / sqrt(n) (Sylvester's
// H, signs s from `seed`): orthogonal, so applying it to both operands along
// K leaves A^T B unchanged up to rounding (NVFP4 recipe, arXiv 2509.25149:
// one random sign vector for every layer). n a power of two.
Matrix hadamard_transform(int n, std::uint64_t seed);
// T applied to each full chunk of t.rows() rows of `m` (a shorter tail left
// as it is), rounded to binary32.
Matrix hadamard_rows(const Matrix& m, const Matrix& t);

}  // namespace rpsim::sim::train
