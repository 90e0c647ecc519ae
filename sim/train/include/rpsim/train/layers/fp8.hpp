// FP8 tensor scaling of matmul inputs.
#pragma once

#include "rpsim/train/layers/layer.hpp"

namespace rpsim::sim::train {

// FP8 helpers, exposed for tests. Per-tensor scale for the next use of a
// tensor: delayed scaling reads the amax history (before this tensor's amax
// is appended), current scaling this tensor's amax.
double fp8_scale(const Matrix& x, const Format& f, const Fp8Recipe& recipe, AmaxHistory& history);
// x * scale computed in binary32, clamped to the format's range and rounded.
Matrix fp8_quantize(const Matrix& x, const Format& f, double scale);
// OCP MX block scaling: blocks of `block` along `axis` (1: along a row,
// 0: down a column), shared E8M0 scale 2^(floor(log2 amax) - emax_elem);
// returns the dequantised values (exact in binary64).
Matrix mx_quantize(const Matrix& x, const Format& f, int block, int axis);

}  // namespace rpsim::sim::train
