// The GEMM's epilogue: what happens to the accumulator after the mainloop,
// as its own layer of the GEMM library (CUTLASS's epilogue: alpha/beta,
// bias, per-tensor/row/column scales, conversion to the output type), so that
// the training ops and the Python front-end ask for one instead of applying
// one themselves.
//
// The order is the one Transformer Engine's FP8 GEMMs and PyTorch's autocast
// GEMMs produce, measured against rpsim train's and cuBLAS's results:
//   1. dequantisation of per-tensor scaled operands: acc * alpha, rounded to
//      the accumulation format; alpha is fl32(1 / (sa * sb)) for per-tensor
//      FP8 (TE's scale_inv product in binary32), and for NVFP4 TE's GEMM alpha
//      from the operands' global amaxes (nvfp4_alpha);
//   2. the bias, cast to its format (the op's compute format, or the
//      accumulation format under FP8: TE adds it in the accumulator's type),
//      added to each row in binary64 -- exact for values of formats of at most
//      26 significand bits -- and the accumulator rounded to the accumulation
//      format (with no bias too: a no-op on its values, but one of the op's
//      roundings, which under a stochastic policy draws its stream);
//   3. the output rounding to the op's output format.
// Per-row/column binary32 scales of torch._scaled_mm and the block scales of
// block-scaled instructions are GemmScales (gemm.hpp): they belong to the
// instruction's or the scaled GEMM's arithmetic, before this epilogue.
#pragma once

#include <Eigen/Core>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim {

struct GemmEpilogue {
  // The factor step 1 multiplies by (1: no step 1).
  double alpha = 1;
  // A 1 x N row, or null; cast to bias_format (when not null) by the
  // epilogue's rounding after step 1, as rpsim train's Linear casts it.
  const Matrix* bias = nullptr;
  const Format* bias_format = nullptr;
  // The result's format after the accumulation format, or null (left in the
  // accumulation format).
  const Format* output = nullptr;
  // How every rounding of the epilogue rounds a matrix to a format: null
  // rounds to nearest even; the training simulator passes its tensor
  // rounding (a policy's stochastic rounding of every op result, keyed per
  // call), so the epilogue's roundings are the op's.
  using Round = void (*)(const Format&, Matrix&);
  Round round = nullptr;
};

// fl32(1 / (sa * sb)): alpha for operands multiplied by per-tensor scales
// sa and sb before the GEMM (FP8 per-tensor scaling).
double dequantisation_factor(double scale_a, double scale_b);

// NVFP4's alpha as Transformer Engine computes it (reference_nvfp4.py at
// d0067d0, qgemm: torch.div(amax_a * amax_b, 6 * 6 * E_a * E_b), both in
// binary32): fl32(fl32(amax_a amax_b) / fl32(36 E_a E_b)), E the E4M3
// maximum each operand's scales were computed with (448; 4over6 may use 256).
double nvfp4_alpha(double amax_a, double amax_b, double e4m3_max_a = 448, double e4m3_max_b = 448);

// Applies steps 1-3 in place to `acc`, an accumulator whose entries are
// values of `accumulation` (the model's output format). Returns the
// accumulator as it was before step 3, when `before_output` is given (the
// telemetry of flushes by the output rounding).
void apply_epilogue(const GemmEpilogue& e, const Format& accumulation, Matrix& acc,
                    Matrix* before_output = nullptr);

}  // namespace rpsim::sim
