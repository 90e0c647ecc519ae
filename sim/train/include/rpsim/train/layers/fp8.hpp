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
// How a block-scaled quantiser (block_quantize_recipe, block_gemm.hpp) groups
// a GEMM input: blocks of recipe.block_size along `axis` (1: along a row, 0:
// down a column), or with `tiles` block_size x block_size tiles (one scale
// per tile); `sr` set: elements rounded stochastically, group g (line or
// tile, row-major) keyed by (sr->seed, mix64(sr->stream ^ mix64(g))).
struct BlockLayout {
  int axis = 1;
  bool tiles = false;
  const RandomStream* sr = nullptr;
};

// The n x n random Hadamard transform T = H diag(s) / sqrt(n) (Sylvester's
// H, signs s from `seed`): orthogonal, so applying it to both operands along
// K leaves A^T B unchanged up to rounding (NVFP4 recipe, arXiv 2509.25149:
// one random sign vector for every layer). n a power of two.
Matrix hadamard_transform(int n, std::uint64_t seed);
// T applied to each full chunk of t.rows() rows of `m` (a shorter tail left
// as it is), rounded to binary32.
Matrix hadamard_rows(const Matrix& m, const Matrix& t);

}  // namespace rpsim::sim::train
