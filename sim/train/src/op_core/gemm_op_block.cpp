// The op core's GEMM op under a block-scaled recipe (OCP MX, NVFP4): A in
// 1D blocks along K, B down K (or in 2D tiles), the weight-gradient GEMM's
// operands rotated by the recipe's random Hadamard transform, dY rounded
// stochastically where the recipe asks (gemm_op.hpp).
#include "../layers/common.hpp"
#include "rpsim/train/gemm_op.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/layers/fp8.hpp"

namespace rpsim::sim::train {
using namespace detail;

Matrix GemmOp::block_forward(const Matrix& a, const Matrix& b, const Formats& f, const GemmKeys& keys,
                             sim::GemmEpilogue& e) {
  // NVFP4's per-tensor scales leave the GEMM to its epilogue (MX: 1).
  const Fp8Recipe& r = spec_.recipe;
  return block_matmul(block_operand(a, *f.compute, r, {1}, &a_stats_, &e.scale_a),
                      block_operand(b, *f.compute, r, {0, r.weight_2d}, &b_stats_, &e.scale_b), spec_.model,
                      keys.stream(0));
}

// The two backward GEMMs on block-scaled inputs.
void GemmOp::block_backward(const GemmSaved& s, const Matrix& dy, const Formats& f, bool need_da,
                            const GemmKeys& keys, GemmGrads& g) {
  const Fp8Recipe& r = spec_.recipe;
  // Stochastic rounding of dY keyed by layer, step and GEMM.
  const RandomStream sr_db = keys.stream(3), sr_da = keys.stream(4);
  // The weight-gradient GEMM's inputs, rotated along K (tokens) by the
  // random Hadamard transform where the recipe asks: T^T T = I, so
  // (T x)^T (T dy) = x^T dy up to the quantisation.
  const Matrix t = r.hadamard ? hadamard_transform(r.hadamard, keys.hadamard_seed) : Matrix();
  const Matrix dy_b = r.hadamard ? hadamard_rows(dy, t) : dy;
  const Matrix at_b = r.hadamard ? Matrix(hadamard_rows(s.a, t).transpose()) : Matrix(s.a.transpose());
  double sdy = 1, sa = 1, sb = 1;
  const BlockOperand dy_cols =
      block_operand(dy_b, *f.backward, r, {0, false, r.gradient_sr ? &sr_db : nullptr}, &dy_stats_, &sdy);
  g.db = block_matmul(block_operand(at_b, *f.compute, r, {1}, &a_stats_, &sa), dy_cols, spec_.model,
                      keys.stream(1));
  dequantize(g.db, sa, sdy, *f.accumulation);
  g.dy_cast_flushed = flushed_mask(dy_b, dy_cols.values);
  if (!need_da) return;
  const BlockOperand dy_rows =
      block_operand(dy, *f.backward, r, {1, false, r.gradient_sr ? &sr_da : nullptr}, &dy_stats_, &sdy);
  g.da =
      block_matmul(dy_rows, block_operand(s.b.transpose(), *f.compute, r, {0, r.weight_2d}, &b_stats_, &sb),
                   spec_.model, keys.stream(2));
  dequantize(g.da, sdy, sb, *f.accumulation);
  // Under the RHT the dB operand is rotated: only dA's cast is in dY's layout.
  if (r.hadamard)
    g.dy_cast_flushed = flushed_mask(dy, dy_rows.values);
  else
    g.dy_cast_flushed = g.dy_cast_flushed || flushed_mask(dy, dy_rows.values);
}

}  // namespace rpsim::sim::train
