// The block-FMA chain over a tile of eight output columns at once (one
// binary64 lane each), for CPUs with AVX-512: the same steps as run_chain
// (tensor_core_chain.hpp), vectorised across the tile's columns instead of
// along K, so a step's exponent maximum, alignment and truncation are lane-wise
// operations with no horizontal reduction. Internal to sim/accumulation.
#pragma once

#include <vector>

#include "tensor_core_chain.hpp"

namespace rpsim::sim::tc_detail {

constexpr int kTile = 8;

// B's columns decoded in plan order, eight columns interleaved: column
// j = 8*J + l at value[(J*P + t)*8 + l] for plan position t (P positions).
// Columns past N are zeros (results discarded).
struct TiledB {
  std::vector<double> value;
  std::vector<int> exponent;
  int tiles = 0;
};

// True when the CPU runs the tile kernel and the model's final rounding is
// one it finishes lane-wise (nearest_even, toward_zero); the caller then
// passes finite operands only.
bool tile_kernel_usable(const Finisher& fin);

// Steps [s0, s1) of `plan` for the columns of `tiles` (1 to 4) consecutive
// tiles, their chains interleaved: av/ae A's row in plan order, bv/be the
// first tile's start in TiledB (the next one `stride` = P*8 further),
// acc[8*tiles] the accumulators (in and out). [s0, s1) starts at an
// instruction's first step. Operands are finite; an accumulator may become
// non-finite (overflow) on the way.
void run_chain_tiles(const Finisher& fin, const ChainPlan& plan, int s0, int s1, const double* av,
                     const int* ae, const double* bv, const int* be, std::size_t stride, int tiles,
                     double* acc);

}  // namespace rpsim::sim::tc_detail
