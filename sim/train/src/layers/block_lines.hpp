// block_quantize_recipe's line path (block_lines.cpp), internal to the layers.
#pragma once

#include <cstddef>

#include "rpsim/formats/recipe_block.hpp"
#include "rpsim/train/layers/block_gemm.hpp"

namespace rpsim::sim::train::detail {

// Blocks of at most this many entries take the line path (OCP MX: 32, NVFP4: 16).
constexpr std::size_t kLineBlock = 64;

// The whole tensor's amax as recipe::nan_max finds it (NaN where an entry is
// one): NVFP4's per-tensor scale, the statistics'.
float tensor_amax_of(const Matrix& x);

// x quantised into `out` (and `scales`, `s`) by lines down its columns
// (`transposed`) or along its rows, or by tiles (g.tiles), where the line path
// has the element: MX with FP8 elements, NVFP4. `sr`: stochastically, each
// code's value `code_value[code]`. False: the element-by-element path's.
bool by_lines(const Matrix& x, bool transposed, const QuantSpec& spec, const recipe::OperandGroups& g,
              const recipe::Nvfp4TensorScale& ts, double decode, Matrix& out, Matrix* scales, Fp8Stats& s,
              const recipe::StochasticElements* sr, const float* code_value);

}  // namespace rpsim::sim::train::detail
