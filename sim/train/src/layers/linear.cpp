// Linear: the matmul core shared with Conv2d, under every policy and FP8 recipe.
#include <algorithm>
#include <type_traits>
#include <utility>

#include "common.hpp"
#include "rpsim/train/layers/block_gemm.hpp"

namespace rpsim::sim::train {
using namespace detail;

namespace {

// sequential_sum(fmt, column j) for every column of `dy` (the bias
// gradient), the same bits: in binary64, and in binary32 where a block's
// terms are all binary32 values, kBlock columns' chains advance side by
// side, each still in row order. One chain at a time waited on the latency
// of every add (a bias sum was about 3% of the MLP step).
template <class T>
bool block_sums(const Matrix& dy, Eigen::Index j0, Eigen::Index cols, double* out) {
  constexpr Eigen::Index kBlock = 8;
  T acc[kBlock] = {};
  const Eigen::Index rows = dy.rows();
  const double* col[kBlock];
  for (Eigen::Index c = 0; c < cols; ++c) col[c] = dy.col(j0 + c).data();
  if constexpr (std::is_same_v<T, float>)
    for (Eigen::Index c = 0; c < cols; ++c)
      for (Eigen::Index i = 0; i < rows; ++i)
        if (double(float(col[c][i])) != col[c][i]) return false;
  for (Eigen::Index c = 0; c < cols; ++c) acc[c] = T(col[c][0]);
  for (Eigen::Index i = 1; i < rows; ++i)
    for (Eigen::Index c = 0; c < kBlock; ++c)
      if (c < cols) acc[c] += T(col[c][i]);
  for (Eigen::Index c = 0; c < cols; ++c) out[c] = double(acc[c]);
  return true;
}

Matrix bias_sums(const Format& fmt, const Matrix& dy) {
  constexpr Eigen::Index kBlock = 8;
  Matrix db(1, dy.cols());
  const bool f64 = fmt == formats::binary64(), f32 = fmt == formats::binary32();
  for (Eigen::Index j = 0; j < dy.cols(); j += kBlock) {
    const Eigen::Index cols = std::min(kBlock, dy.cols() - j);
    if (dy.rows() > 0 && f64 && block_sums<double>(dy, j, cols, &db(0, j))) continue;
    if (dy.rows() > 0 && f32 && block_sums<float>(dy, j, cols, &db(0, j))) continue;
    for (Eigen::Index c = j; c < j + cols; ++c) db(0, c) = sequential_sum(fmt, dy.col(c).data(), dy.rows());
  }
  return db;
}

}  // namespace

Linear::Linear(std::string name, Eigen::Index in, Eigen::Index out) : Layer(std::move(name)) {
  weight.name = this->name() + ".weight";
  bias.name = this->name() + ".bias";
  weight.value = Matrix::Zero(in, out);
  bias.value = Matrix::Zero(1, out);
}

Matrix Linear::core_forward(const Matrix& x, const Format& x_format, const StepContext& ctx) {
  const PrecisionPolicy& pol = *ctx.policy;
  const OpRule& rule = pol.rule(op_name_);
  const Formats f = formats_of(rule, pol, x_format);
  const Format& accf = rule.accumulation.output_format();
  const bool blocked = block_fp8(rule, pol) && !high_precision_;
  // The input itself only where backward quantises it again (FP8); the
  // other paths keep its cast (a copy of a tensor the size of a batch's
  // activations saved per step).
  x_size_ = x.size();
  x_ = per_tensor_fp8(rule, pol) || blocked ? x : Matrix();
  x_format_ = &x_format;
  saved_format_ = f.compute;
  const RandomStream forward_stream = matmul_stream(name(), ctx, 0);
  Matrix acc;
  x_stats_ = w_stats_ = Fp8Stats();
  if (blocked) {
    // Activations in 1D blocks along K; weights down K, or in 2D tiles.
    // NVFP4's per-tensor scales leave the GEMM to its epilogue (MX: 1).
    double sx = 1, sw = 1;
    acc =
        block_matmul(block_operand(x, *f.compute, pol.fp8, {1}, &x_stats_, &sx),
                     block_operand(weight.value, *f.compute, pol.fp8, {0, pol.fp8.weight_2d}, &w_stats_, &sw),
                     rule.accumulation, forward_stream);
    dequantize(acc, sx, sw, accf);
  } else if (per_tensor_fp8(rule, pol)) {
    x_scale_ = fp8_scale(x, *f.compute, pol.fp8, x_history_, &x_stats_);
    w_scale_ = fp8_scale(weight.value, *f.compute, pol.fp8, w_history_, &w_stats_);
    acc = matmul(fp8_quantize(x, *f.compute, x_scale_, &x_stats_),
                 fp8_quantize(weight.value, *f.compute, w_scale_, &w_stats_), rule.accumulation,
                 forward_stream);
    dequantize(acc, x_scale_, w_scale_, accf);
  } else {
    xc_ = rounded(*f.compute, x);
    wc_ = rounded(*f.compute, weight.value);
    acc = matmul(xc_, wc_, unscaled_model(rule, *f.compute), forward_stream);
  }
  // Bias added in the accumulation format, as a GEMM epilogue does.
  const Eigen::RowVectorXd b = rounded(per_tensor_fp8(rule, pol) || blocked ? accf : *f.compute, bias.value);
  acc.rowwise() += b;
  round_in_place(accf, acc);
  round_in_place(*f.output, acc);
  return acc;
}

// The two backward GEMMs on block-scaled inputs (core_backward's blocked branch).
void Linear::block_scaled_backward(const Matrix& dy, const StepContext& ctx, const Formats& f,
                                   bool need_input_grad, Matrix& dw, Matrix& dx) {
  const PrecisionPolicy& pol = *ctx.policy;
  const OpRule& rule = pol.rule(op_name_);
  const Format& accf = rule.accumulation.output_format();
  const RandomStream dw_stream = matmul_stream(name(), ctx, 1), dx_stream = matmul_stream(name(), ctx, 2);
  const Fp8Recipe& r = pol.fp8;
  // Stochastic rounding of dy keyed by layer, step and GEMM.
  const RandomStream sr_dw = matmul_stream(name(), ctx, 3), sr_dx = matmul_stream(name(), ctx, 4);
  // The weight-gradient GEMM's inputs, rotated along K (tokens) by the
  // random Hadamard transform where the recipe asks: T^T T = I, so
  // (T x)^T (T dy) = x^T dy up to the quantisation.
  const Matrix t = r.hadamard ? hadamard_transform(r.hadamard, ctx.seed) : Matrix();
  const Matrix dy_w = r.hadamard ? hadamard_rows(dy, t) : dy;
  const Matrix xt_w = r.hadamard ? Matrix(hadamard_rows(x_, t).transpose()) : Matrix(x_.transpose());
  double sdy = 1, sx = 1, sw = 1;
  const BlockOperand dy_cols =
      block_operand(dy_w, *f.backward, r, {0, false, r.gradient_sr ? &sr_dw : nullptr}, &dy_stats_, &sdy);
  dw = block_matmul(block_operand(xt_w, *f.compute, r, {1}, &x_stats_, &sx), dy_cols, rule.accumulation,
                    dw_stream);
  dequantize(dw, sx, sdy, accf);
  dy_cast_flushed_ = flushed_mask(dy_w, dy_cols.values);
  if (!need_input_grad) return;
  const BlockOperand dy_rows =
      block_operand(dy, *f.backward, r, {1, false, r.gradient_sr ? &sr_dx : nullptr}, &dy_stats_, &sdy);
  dx = block_matmul(dy_rows,
                    block_operand(weight.value.transpose(), *f.compute, r, {0, r.weight_2d}, &w_stats_, &sw),
                    rule.accumulation, dx_stream);
  dequantize(dx, sdy, sw, accf);
  // Under the RHT the dw operand is rotated: only dx's cast is in dy's layout.
  if (r.hadamard)
    dy_cast_flushed_ = flushed_mask(dy, dy_rows.values);
  else
    dy_cast_flushed_ = dy_cast_flushed_ || flushed_mask(dy, dy_rows.values);
}

Matrix Linear::core_backward(const Matrix& dy, const StepContext& ctx, bool need_input_grad,
                             Matrix* dx_before_rounding) {
  const PrecisionPolicy& pol = *ctx.policy;
  const OpRule& rule = pol.rule(op_name_);
  const Formats f = formats_of(rule, pol, *x_format_);
  const Format& accf = rule.accumulation.output_format();
  const bool blocked = block_fp8(rule, pol) && !high_precision_;
  const RandomStream dw_stream = matmul_stream(name(), ctx, 1), dx_stream = matmul_stream(name(), ctx, 2);
  // dw_raw, dx_raw: the matmul results before any rounding (underflow telemetry).
  Matrix dw, dx, dy_used, dw_raw, dx_raw;
  const bool fp8 = per_tensor_fp8(rule, pol);
  const Matrix xt = fp8 ? Matrix(x_.transpose()) : Matrix();
  const Matrix wt = fp8 ? Matrix(weight.value.transpose()) : Matrix();
  dy_stats_ = Fp8Stats();
  if (blocked) {
    block_scaled_backward(dy, ctx, f, need_input_grad, dw, dx);
    dy_used = dy;
  } else if (per_tensor_fp8(rule, pol)) {
    const double dy_scale = fp8_scale(dy, *f.backward, pol.fp8, dy_history_, &dy_stats_);
    const Matrix dyq = fp8_quantize(dy, *f.backward, dy_scale, &dy_stats_);
    dy_cast_flushed_ = flushed_mask(dy, dyq);
    dw = matmul(fp8_quantize(xt, *f.compute, x_scale_), dyq, rule.accumulation, dw_stream);
    dw_raw = dw;
    dequantize(dw, x_scale_, dy_scale, accf);
    if (need_input_grad) {
      dx = matmul(dyq, fp8_quantize(wt, *f.compute, w_scale_), rule.accumulation, dx_stream);
      dx_raw = dx;
      dequantize(dx, dy_scale, w_scale_, accf);
    }
    dy_used = dy;  // Transformer Engine reduces dbias from the unquantised gradient
  } else {
    dy_used = rounded(*f.backward, dy);
    dy_cast_flushed_ = flushed_mask(dy, dy_used);
    // The casts saved by forward (autocast saves the low-precision copies).
    const sim::AccumulationModel model = unscaled_model(rule, *f.compute);
    dw = matmul_tn(xc_, dy_used, model, dw_stream);
    if (need_input_grad) dx = matmul_nt(dy_used, wc_, model, dx_stream);
  }
  if (!per_tensor_fp8(rule, pol)) {
    dw_raw = dw;
    if (need_input_grad) dx_raw = dx;
  }
  // The weight gradient leaves the op in its output format and is stored in
  // the policy's gradient format (autocast: fp16 grad cast back to fp32).
  round_in_place(*f.output, dw);
  round_in_place(*pol.gradients, dw);
  weight.grad_underflow = count_flushed(dw_raw, dw);
  weight.grad = std::move(dw);
  Matrix db = bias_sums(accf, dy_used);
  const Matrix db_raw = db;
  round_in_place(*f.output, db);
  round_in_place(*pol.gradients, db);
  bias.grad_underflow = count_flushed(db_raw, db);
  bias.grad = std::move(db);
  if (need_input_grad) {
    round_in_place(*f.output, dx);
    if (dx_before_rounding) *dx_before_rounding = std::move(dx_raw);
  }
  return dx;
}

// A layer kept in high precision under a policy whose GEMMs run on a
// block-scaled instruction runs the same GPU's unscaled one (bf16 inputs).
sim::AccumulationModel Linear::unscaled_model(const OpRule& rule, const Format& compute) const {
  return high_precision_ ? high_precision_model(rule.accumulation, compute) : rule.accumulation;
}

Formats Linear::formats_of(const OpRule& rule, const PrecisionPolicy& pol, const Format& input) const {
  Formats f = resolve(rule, input);
  // A layer the recipe keeps in high precision casts its GEMM inputs to
  // bfloat16 (2509.25149 keeps them in BF16), outputs as the rule says.
  if (high_precision_ && block_fp8(rule, pol)) f.compute = f.backward = &formats::bfloat16();
  return f;
}

Tensor Linear::forward(const Tensor& x, const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("linear"), *x.format);
  return Tensor{core_forward(x.values, *x.format, ctx), f.output};
}

Tensor Linear::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  Matrix raw;
  Matrix dx = core_backward(dy.values, ctx, need_input_grad, &raw);
  if (!need_input_grad) return Tensor{Matrix(), x_format_};
  round_in_place(*x_format_, dx);
  Mask flushed = flushed_mask(raw, dx);
  return Tensor{std::move(dx), x_format_, std::move(flushed)};
}

std::vector<std::pair<std::string, const Fp8Stats*>> Linear::fp8_stats(const PrecisionPolicy& p) const {
  const OpRule& rule = p.rule(op_name_);
  if (!per_tensor_fp8(rule, p) && !(block_fp8(rule, p) && !high_precision_)) return {};
  return {{"x", &x_stats_}, {"w", &w_stats_}, {"dy", &dy_stats_}};
}

std::vector<std::pair<Eigen::Index, const Format*>> Linear::saved() const {
  // What autograd keeps: the input cast to the compute format (FP8: its
  // quantised copy, one byte per element).
  return {{x_size_, saved_format_}};
}

}  // namespace rpsim::sim::train
