// FP8 tensor scaling of matmul inputs.
#pragma once

#include <cstdint>

#include "rpsim/train/layers/layer.hpp"

namespace rpsim::sim::train {

// FP8 helpers, exposed for tests. Per-tensor scale for the next use of a
// tensor: delayed scaling reads the amax history (before this tensor's amax
// is appended), current scaling this tensor's amax. `stats`, when given,
// gets this tensor's amax and the scale returned.
double fp8_scale(const Matrix& x, const Format& f, const Fp8Recipe& recipe, AmaxHistory& history,
                 Fp8Stats* stats = nullptr);
// x * scale computed in binary32, clamped to the format's range and rounded;
// `stats`, when given, counts the entries, the saturated and the flushed.
Matrix fp8_quantize(const Matrix& x, const Format& f, double scale, Fp8Stats* stats = nullptr);
// OCP MX block scaling: blocks of `block` along `axis` (1: along a row,
// 0: down a column), shared E8M0 scale 2^(floor(log2 amax) - emax_elem);
// returns the dequantised values (exact in binary64). `stats`, when given,
// takes the amax, the range of the block scales (1 / 2^shared, as a
// per-tensor scale multiplies) over blocks with a nonzero finite amax, and
// the counts, added to what it holds.
Matrix mx_quantize(const Matrix& x, const Format& f, int block, int axis, Fp8Stats* stats = nullptr);

}  // namespace rpsim::sim::train
