// The op core's GEMM op under a block-scaled recipe (OCP MX, NVFP4): A in
// 1D blocks along K, B down K (or in 2D tiles), the weight-gradient GEMM's
// operands rotated by the recipe's random Hadamard transform, dY rounded
// stochastically where the recipe asks (gemm_op.hpp).
#include "../layers/common.hpp"
#include "rpsim/accumulation/tiled_copy.hpp"
#include "rpsim/train/gemm_op.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/layers/fp8.hpp"

namespace rpsim::sim::train {
using namespace detail;

namespace {

// The GEMM's dequantising alpha of two block operands: NVFP4's from their
// global amaxes (TE's qgemm), 1 for MX and FP8 blocks (their scales are the
// blocks' own).
double block_alpha(const Fp8Recipe& r, const BlockOperand& a, const BlockOperand& b) {
  return r.scaling == Fp8Scaling::nvfp4 ? sim::nvfp4_alpha(a.tensor_amax, b.tensor_amax) : 1.0;
}

// alpha * acc rounded to the accumulation format: the epilogue's step 1
// alone (a backward GEMM has no bias, and its output rounding comes later).
void dequantize_by(Matrix& acc, double alpha, const Format& accumulation) {
  if (alpha == 1.0) return;
  acc *= alpha;
  round_in_place(accumulation, acc);
}

}  // namespace

Matrix GemmOp::block_forward(const Matrix& a, const Matrix& b, const Formats& f, const GemmKeys& keys,
                             sim::GemmEpilogue& e) {
  const Fp8Recipe& r = spec_.recipe;
  const bool keep = block_scales_read(r, spec_.model);
  const BlockOperand qa = block_operand(a, *f.compute, r, {1}, &a_stats_, nullptr, keep);
  const BlockOperand qb = block_operand(b, *f.compute, r, {0, r.weight_2d}, &b_stats_, nullptr, keep);
  e.alpha = block_alpha(r, qa, qb);
  return block_matmul(qa, qb, spec_.model, keys.stream(0));
}

// The two backward GEMMs on block-scaled inputs.
void GemmOp::block_backward(const GemmSaved& s, const Matrix& dy, const Formats& f, bool need_da,
                            const GemmKeys& keys, GemmGrads& g) {
  const Fp8Recipe& r = spec_.recipe;
  const bool keep = block_scales_read(r, spec_.model);
  // Stochastic rounding of dY keyed by layer, step and GEMM.
  const RandomStream sr_db = keys.stream(3), sr_da = keys.stream(4);
  // The weight-gradient GEMM's inputs, rotated along K (tokens) by the
  // random Hadamard transform where the recipe asks: T^T T = I, so
  // (T x)^T (T dy) = x^T dy up to the quantisation.
  const Matrix t = !r.hadamard ? Matrix()
                   : r.hadamard_signs == Fp8Recipe::HadamardSigns::te
                       ? te_hadamard_transform(r.hadamard)
                       : hadamard_transform(r.hadamard, keys.hadamard_seed);
  const Matrix dy_b = r.hadamard ? hadamard_rows(dy, t) : dy;
  const Matrix at_b = r.hadamard ? sim::transposed(hadamard_rows(s.a, t)) : sim::transposed(s.a);
  const BlockOperand dy_cols = block_operand(
      dy_b, *f.backward, r, {0, false, r.gradient_sr ? &sr_db : nullptr}, &dy_stats_, nullptr, keep);
  const BlockOperand at_q = block_operand(at_b, *f.compute, r, {1}, &a_stats_, nullptr, keep);
  g.db = block_matmul(at_q, dy_cols, spec_.model, keys.stream(1));
  dequantize_by(g.db, block_alpha(r, at_q, dy_cols), *f.accumulation);
  g.dy_cast_flushed = flushed_mask(dy_b, dy_cols.values);
  if (!need_da) return;
  const BlockOperand dy_rows = block_operand(dy, *f.backward, r, {1, false, r.gradient_sr ? &sr_da : nullptr},
                                             &dy_stats_, nullptr, keep);
  const BlockOperand bt_q =
      block_operand(sim::transposed(s.b), *f.compute, r, {0, r.weight_2d}, &b_stats_, nullptr, keep);
  g.da = block_matmul(dy_rows, bt_q, spec_.model, keys.stream(2));
  dequantize_by(g.da, block_alpha(r, dy_rows, bt_q), *f.accumulation);
  // Under the RHT the dB operand is rotated: only dA's cast is in dY's layout.
  if (r.hadamard)
    g.dy_cast_flushed = flushed_mask(dy, dy_rows.values);
  else
    g.dy_cast_flushed = g.dy_cast_flushed || flushed_mask(dy, dy_rows.values);
}

}  // namespace rpsim::sim::train
