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
// OCP MX block scaling: blocks of `block` along `axis` (1: along a row,
// 0: down a column), shared E8M0 scale 2^(floor(log2 amax) - emax_elem);
// returns the dequantised values (exact in binary64). `stats`, when given,
// takes the amax, the range of the block scales (1 / 2^shared, as a
// per-tensor scale multiplies) over blocks with a nonzero finite amax, and
// the counts, added to what it holds.
Matrix mx_quantize(const Matrix& x, const Format& f, int block, int axis, Fp8Stats* stats = nullptr);

}  // namespace rpsim::sim::train
