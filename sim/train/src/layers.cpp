// Forward and backward of the layers, each op in the formats of its rule.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "rpsim/formats/random.hpp"
#include "rpsim/train/layers.hpp"

namespace rpsim::sim::train {
namespace {

struct Formats {
  const Format* compute;
  const Format* output;
  const Format* backward;
};

Formats resolve(const OpRule& r, const Format& input) {
  if (r.follow_inputs) return {&input, &input, &input};
  return {r.compute, r.output, r.backward_compute ? r.backward_compute : r.compute};
}

const Format& f32() {
  return formats::binary32();
}

bool per_tensor_fp8(const OpRule& r, const PrecisionPolicy& p) {
  return r.scaled_inputs && (p.fp8.scaling == Fp8Scaling::delayed || p.fp8.scaling == Fp8Scaling::current);
}
bool block_fp8(const OpRule& r, const PrecisionPolicy& p) {
  return r.scaled_inputs && p.fp8.scaling == Fp8Scaling::mx;
}

// The stochastic-rounding key of one matmul of one layer at one step
// (`which`: 0 forward, 1 weight gradient, 2 input gradient). Only models
// that round stochastically read it.
RandomStream matmul_stream(const std::string& layer, const StepContext& ctx, std::uint64_t which) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the layer name
  for (const unsigned char ch : layer) h = (h ^ ch) * 0x100000001b3ull;
  return RandomStream{ctx.seed, mix64(h ^ mix64(ctx.step)) + which};
}

// acc * (1 / (sa * sb)) in binary32, then in the accumulation format: the
// GEMM epilogue's dequantisation.
void dequantize(Matrix& acc, double sa, double sb, const Format& acc_format) {
  const double inv = round_value(f32(), 1.0 / (sa * sb));
  if (inv == 1.0) return;
  acc *= inv;
  round_in_place(acc_format, acc);
}

}  // namespace

double fp8_scale(const Matrix& x, const Format& f, const Fp8Recipe& recipe, AmaxHistory& history) {
  const double amax_now = x.size() ? x.cwiseAbs().maxCoeff() : 0.0;
  double amax = amax_now;
  if (recipe.scaling == Fp8Scaling::delayed && !history.values.empty()) {
    amax = recipe.amax_compute_algo == "most_recent"
               ? history.values.back()
               : *std::max_element(history.values.begin(), history.values.end());
  }
  if (recipe.scaling == Fp8Scaling::delayed) {
    history.values.push_back(amax_now);
    if (int(history.values.size()) > recipe.amax_history_len) history.values.erase(history.values.begin());
  }
  // Transformer Engine keeps scale 1 when amax is zero or not finite.
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0;
  return round_value(f32(), f.max_finite() / amax / std::ldexp(1.0, recipe.margin));
}

Matrix fp8_quantize(const Matrix& x, const Format& f, double scale) {
  const double mx = f.max_finite();
  Matrix q(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    double v = round_value(f32(), x.data()[i] * scale);
    if (std::isfinite(v)) v = std::clamp(v, -mx, mx);
    q.data()[i] = round_value(f, v);
  }
  return q;
}

Matrix mx_quantize(const Matrix& x, const Format& f, int block, int axis) {
  Matrix out(x.rows(), x.cols());
  const Eigen::Index lines = axis == 1 ? x.rows() : x.cols();
  const Eigen::Index length = axis == 1 ? x.cols() : x.rows();
  auto at = [&](const Matrix& m, Eigen::Index line, Eigen::Index k) -> const double& {
    return axis == 1 ? m(line, k) : m(k, line);
  };
  const double mx = f.max_finite();
  for (Eigen::Index line = 0; line < lines; ++line)
    for (Eigen::Index k0 = 0; k0 < length; k0 += block) {
      const Eigen::Index k1 = std::min<Eigen::Index>(length, k0 + block);
      double amax = 0;
      for (Eigen::Index k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(at(x, line, k)));
      // OCP MX v1.0 section 6.3: X = 2^(floor(log2(amax)) - emax_elem).
      const int shared = amax > 0 && std::isfinite(amax) ? std::ilogb(amax) - f.emax : 0;
      const double scale = std::ldexp(1.0, std::clamp(shared, -127, 127));
      for (Eigen::Index k = k0; k < k1; ++k) {
        double v = at(x, line, k) / scale;
        if (std::isfinite(v)) v = std::clamp(v, -mx, mx);
        const_cast<double&>(at(out, line, k)) = round_value(f, v) * scale;
      }
    }
  return out;
}

// ---- Linear ------------------------------------------------------------

Linear::Linear(std::string name, Eigen::Index in, Eigen::Index out) : Layer(std::move(name)) {
  weight.name = this->name() + ".weight";
  bias.name = this->name() + ".bias";
  weight.value = Matrix::Zero(in, out);
  bias.value = Matrix::Zero(1, out);
}

Matrix Linear::core_forward(const Matrix& x, const Format& x_format, const StepContext& ctx) {
  const PrecisionPolicy& pol = *ctx.policy;
  const OpRule& rule = pol.rule(op_name_);
  const Formats f = resolve(rule, x_format);
  const Format& accf = rule.accumulation.output_format();
  x_ = x;
  x_format_ = &x_format;
  saved_format_ = f.compute;
  const RandomStream forward_stream = matmul_stream(name(), ctx, 0);
  Matrix acc;
  if (block_fp8(rule, pol)) {
    acc = matmul(mx_quantize(x, *f.compute, pol.fp8.block_size, 1),
                 mx_quantize(weight.value, *f.compute, pol.fp8.block_size, 0), rule.accumulation,
                 forward_stream);
  } else if (per_tensor_fp8(rule, pol)) {
    x_scale_ = fp8_scale(x, *f.compute, pol.fp8, x_history_);
    w_scale_ = fp8_scale(weight.value, *f.compute, pol.fp8, w_history_);
    acc = matmul(fp8_quantize(x, *f.compute, x_scale_), fp8_quantize(weight.value, *f.compute, w_scale_),
                 rule.accumulation, forward_stream);
    dequantize(acc, x_scale_, w_scale_, accf);
  } else {
    xc_ = rounded(*f.compute, x);
    wc_ = rounded(*f.compute, weight.value);
    acc = matmul(xc_, wc_, rule.accumulation, forward_stream);
  }
  // Bias added in the accumulation format, as a GEMM epilogue does.
  const Eigen::RowVectorXd b =
      rounded(per_tensor_fp8(rule, pol) || block_fp8(rule, pol) ? accf : *f.compute, bias.value);
  acc.rowwise() += b;
  round_in_place(accf, acc);
  round_in_place(*f.output, acc);
  return acc;
}

Matrix Linear::core_backward(const Matrix& dy, const StepContext& ctx, bool need_input_grad,
                             Matrix* dx_before_rounding) {
  const PrecisionPolicy& pol = *ctx.policy;
  const OpRule& rule = pol.rule(op_name_);
  const Formats f = resolve(rule, *x_format_);
  const Format& accf = rule.accumulation.output_format();
  const RandomStream dw_stream = matmul_stream(name(), ctx, 1), dx_stream = matmul_stream(name(), ctx, 2);
  // dw_raw, dx_raw: the matmul results before any rounding (underflow telemetry).
  Matrix dw, dx, dy_used, dw_raw, dx_raw;
  const bool fp8 = block_fp8(rule, pol) || per_tensor_fp8(rule, pol);
  const Matrix xt = fp8 ? Matrix(x_.transpose()) : Matrix();
  const Matrix wt = fp8 ? Matrix(weight.value.transpose()) : Matrix();
  if (block_fp8(rule, pol)) {
    const int bs = pol.fp8.block_size;
    const Matrix dy_cols = mx_quantize(dy, *f.backward, bs, 0);
    dw = matmul(mx_quantize(xt, *f.compute, bs, 1), dy_cols, rule.accumulation, dw_stream);
    dy_cast_flushed_ = flushed_mask(dy, dy_cols);
    if (need_input_grad) {
      const Matrix dy_rows = mx_quantize(dy, *f.backward, bs, 1);
      dx = matmul(dy_rows, mx_quantize(wt, *f.compute, bs, 0), rule.accumulation, dx_stream);
      dy_cast_flushed_ = dy_cast_flushed_ || flushed_mask(dy, dy_rows);
    }
    dy_used = dy;
  } else if (per_tensor_fp8(rule, pol)) {
    const double dy_scale = fp8_scale(dy, *f.backward, pol.fp8, dy_history_);
    const Matrix dyq = fp8_quantize(dy, *f.backward, dy_scale);
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
    dw = matmul(xc_.transpose(), dy_used, rule.accumulation, dw_stream);
    if (need_input_grad) dx = matmul(dy_used, wc_.transpose(), rule.accumulation, dx_stream);
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
  Matrix db(1, dy_used.cols());
  for (Eigen::Index j = 0; j < dy_used.cols(); ++j)
    db(0, j) = sequential_sum(accf, dy_used.col(j).data(), dy_used.rows());
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

std::vector<std::pair<Eigen::Index, const Format*>> Linear::saved() const {
  // What autograd keeps: the input cast to the compute format (FP8: its
  // quantised copy, one byte per element).
  return {{x_.size(), saved_format_}};
}

// ---- ReLU, GELU ----------------------------------------------------------

Tensor ReLU::forward(const Tensor& x, const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("relu"), *x.format);
  x_ = Tensor{rounded(*f.compute, x.values), f.compute};
  Matrix y = x_.values.cwiseMax(0.0);
  round_in_place(*f.output, y);
  return Tensor{std::move(y), f.output};
}

Tensor ReLU::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  if (!need_input_grad) return Tensor{Matrix(), x_.format};
  const Formats f = resolve(ctx.policy->rule("relu"), *x_.format);
  // Masking first changes nothing (rounding keeps zeros) and leaves the
  // masked-out zeros out of the underflow count.
  const Matrix raw = (x_.values.array() > 0).select(dy.values, 0.0);
  Matrix dx = rounded(*f.backward, raw);
  round_in_place(*x_.format, dx);
  Mask flushed = flushed_mask(raw, dx);
  if (dy.flushed.size()) flushed = flushed || (dy.flushed && x_.values.array() > 0);
  return Tensor{std::move(dx), x_.format, std::move(flushed)};
}

std::vector<std::pair<Eigen::Index, const Format*>> ReLU::saved() const {
  return {{x_.values.size(), x_.format}};
}

namespace {
double gelu(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
double gelu_derivative(double x) {
  constexpr double inv_sqrt_2pi = 0.3989422804014327;
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * inv_sqrt_2pi * std::exp(-0.5 * x * x);
}
}  // namespace

Tensor GELU::forward(const Tensor& x, const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("gelu"), *x.format);
  x_ = Tensor{rounded(*f.compute, x.values), f.compute};
  Matrix y = x_.values.unaryExpr([](double v) { return gelu(v); });
  round_in_place(*f.compute, y);
  round_in_place(*f.output, y);
  return Tensor{std::move(y), f.output};
}

Tensor GELU::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  if (!need_input_grad) return Tensor{Matrix(), x_.format};
  const Formats f = resolve(ctx.policy->rule("gelu"), *x_.format);
  Matrix d = x_.values.unaryExpr([](double v) { return gelu_derivative(v); });
  round_in_place(*f.backward, d);
  const Matrix raw = rounded(*f.backward, dy.values).cwiseProduct(d);
  Matrix dx = rounded(*f.backward, raw);
  round_in_place(*x_.format, dx);
  Mask flushed = flushed_mask(raw, dx);
  if (dy.flushed.size()) flushed = flushed || dy.flushed;
  return Tensor{std::move(dx), x_.format, std::move(flushed)};
}

std::vector<std::pair<Eigen::Index, const Format*>> GELU::saved() const {
  return {{x_.values.size(), x_.format}};
}

// ---- LayerNorm ----------------------------------------------------------

LayerNorm::LayerNorm(std::string name, Eigen::Index features, double eps)
    : Layer(std::move(name)), eps_(eps) {
  gamma.name = this->name() + ".weight";
  beta.name = this->name() + ".bias";
  gamma.value = Matrix::Ones(1, features);
  beta.value = Matrix::Zero(1, features);
}

Tensor LayerNorm::forward(const Tensor& x, const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("layer_norm"), *x.format);
  const Format& c = *f.compute;
  x_format_ = x.format;
  compute_ = &c;
  const Matrix xc = rounded(c, x.values);
  const Eigen::Index n = xc.cols();
  const Matrix g = rounded(c, gamma.value), b = rounded(c, beta.value);
  xhat_.resize(xc.rows(), n);
  rstd_.resize(xc.rows());
  Matrix y(xc.rows(), n);
  std::vector<double> row(static_cast<std::size_t>(n)), sq(static_cast<std::size_t>(n));
  for (Eigen::Index i = 0; i < xc.rows(); ++i) {
    for (Eigen::Index j = 0; j < n; ++j) row[std::size_t(j)] = xc(i, j);
    const double mean = round_value(c, sequential_sum(c, row.data(), n) / double(n));
    for (Eigen::Index j = 0; j < n; ++j) {
      row[std::size_t(j)] = round_value(c, xc(i, j) - mean);
      sq[std::size_t(j)] = round_value(c, row[std::size_t(j)] * row[std::size_t(j)]);
    }
    const double var = round_value(c, sequential_sum(c, sq.data(), n) / double(n));
    const double rstd = round_value(c, 1.0 / std::sqrt(round_value(c, var + eps_)));
    rstd_(i) = rstd;
    for (Eigen::Index j = 0; j < n; ++j) {
      const double xh = round_value(c, row[std::size_t(j)] * rstd);
      xhat_(i, j) = xh;
      y(i, j) = round_value(c, round_value(c, xh * g(0, j)) + b(0, j));
    }
  }
  round_in_place(*f.output, y);
  return Tensor{std::move(y), f.output};
}

Tensor LayerNorm::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  const PrecisionPolicy& pol = *ctx.policy;
  const Format& c = *compute_;
  const Matrix d = rounded(c, dy.values);
  const Eigen::Index n = d.cols();
  Matrix dgamma(1, n), dbeta(1, n);
  for (Eigen::Index j = 0; j < n; ++j) {
    double sg = 0, sb = 0;
    for (Eigen::Index i = 0; i < d.rows(); ++i) {
      sg = round_value(c, sg + round_value(c, d(i, j) * xhat_(i, j)));
      sb = round_value(c, sb + d(i, j));
    }
    dgamma(0, j) = sg;
    dbeta(0, j) = sb;
  }
  gamma.grad = rounded(*pol.gradients, dgamma);
  beta.grad = rounded(*pol.gradients, dbeta);
  gamma.grad_underflow = count_flushed(dgamma, gamma.grad);
  beta.grad_underflow = count_flushed(dbeta, beta.grad);
  if (!need_input_grad) return Tensor{Matrix(), x_format_};
  Matrix dx(d.rows(), n);
  for (Eigen::Index i = 0; i < d.rows(); ++i) {
    Eigen::ArrayXd dxhat = d.row(i).transpose().array() * gamma.value.row(0).transpose().array();
    const double s1 = dxhat.sum();
    const double s2 = (dxhat * xhat_.row(i).transpose().array()).sum();
    for (Eigen::Index j = 0; j < n; ++j)
      dx(i, j) = rstd_(i) / double(n) * (double(n) * dxhat(j) - s1 - xhat_(i, j) * s2);
  }
  const Matrix raw = dx;
  round_in_place(c, dx);
  round_in_place(*x_format_, dx);
  Mask flushed = flushed_mask(raw, dx);
  return Tensor{std::move(dx), x_format_, std::move(flushed)};
}

std::vector<std::pair<Eigen::Index, const Format*>> LayerNorm::saved() const {
  return {{xhat_.size() + rstd_.size(), compute_}};
}

// ---- Conv2d -------------------------------------------------------------

Conv2d::Conv2d(std::string name, int in_channels, int out_channels, int height, int width, int kernel,
               int padding)
    : Linear(std::move(name), Eigen::Index(in_channels) * kernel * kernel, out_channels),
      c_(in_channels),
      oc_(out_channels),
      h_(height),
      w_(width),
      k_(kernel),
      pad_(padding),
      out_h_(height + 2 * padding - kernel + 1),
      out_w_(width + 2 * padding - kernel + 1) {
  set_op_name("conv2d");
  if (out_h_ <= 0 || out_w_ <= 0) throw std::invalid_argument(this->name() + ": kernel larger than image");
}

namespace {

// From the matmul layout (one row per batch item and output position, one
// column per output channel) to the image layout (one row per batch item,
// channels then positions): a conv output, or a mask over one.
template <class M>
M to_image_layout(const M& rows, Eigen::Index batch, Eigen::Index positions, Eigen::Index channels) {
  M out(batch, channels * positions);
  for (Eigen::Index b = 0; b < batch; ++b)
    for (Eigen::Index p = 0; p < positions; ++p)
      for (Eigen::Index o = 0; o < channels; ++o) out(b, o * positions + p) = rows(b * positions + p, o);
  return out;
}

}  // namespace

template <class F>
void Conv2d::for_each_patch_entry(Eigen::Index batch, F&& f) const {
  const Eigen::Index positions = Eigen::Index(out_h_) * out_w_;
  for (Eigen::Index b = 0; b < batch; ++b)
    for (int oy = 0; oy < out_h_; ++oy)
      for (int ox = 0; ox < out_w_; ++ox) {
        const Eigen::Index r = b * positions + oy * out_w_ + ox;
        for (int ch = 0; ch < c_; ++ch)
          for (int ky = 0; ky < k_; ++ky)
            for (int kx = 0; kx < k_; ++kx) {
              const int iy = oy + ky - pad_, ix = ox + kx - pad_;
              if (iy < 0 || iy >= h_ || ix < 0 || ix >= w_) continue;
              f(r, Eigen::Index((ch * k_ + ky) * k_ + kx), b, (Eigen::Index(ch) * h_ + iy) * w_ + ix);
            }
      }
}

Tensor Conv2d::forward(const Tensor& x, const StepContext& ctx) {
  const Eigen::Index batch = x.values.rows();
  if (x.values.cols() != Eigen::Index(c_) * h_ * w_)
    throw std::invalid_argument(name() + ": expected " + std::to_string(c_ * h_ * w_) + " input features");
  batch_ = batch;
  x_format_ = x.format;
  const Eigen::Index positions = Eigen::Index(out_h_) * out_w_;
  Matrix cols = Matrix::Zero(batch * positions, Eigen::Index(c_) * k_ * k_);
  for_each_patch_entry(batch, [&](Eigen::Index r, Eigen::Index col, Eigen::Index b, Eigen::Index in) {
    cols(r, col) = x.values(b, in);
  });
  const Formats f = resolve(ctx.policy->rule("conv2d"), *x.format);
  const Matrix out = core_forward(cols, *x.format, ctx);
  return Tensor{to_image_layout(out, batch, positions, oc_), f.output};
}

Tensor Conv2d::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  const Eigen::Index positions = Eigen::Index(out_h_) * out_w_;
  Matrix d(batch_ * positions, oc_);
  for (Eigen::Index b = 0; b < batch_; ++b)
    for (Eigen::Index p = 0; p < positions; ++p)
      for (int o = 0; o < oc_; ++o) d(b * positions + p, o) = dy.values(b, o * positions + p);
  Matrix dcols_raw;
  const Matrix dcols = core_backward(d, ctx, need_input_grad, &dcols_raw);
  if (!need_input_grad) return Tensor{Matrix(), x_format_};
  // col2im: overlapping patches summed in binary64.
  auto col2im = [&](const Matrix& cols) {
    Matrix dx = Matrix::Zero(batch_, Eigen::Index(c_) * h_ * w_);
    for_each_patch_entry(batch_, [&](Eigen::Index r, Eigen::Index col, Eigen::Index b, Eigen::Index in) {
      dx(b, in) += cols(r, col);
    });
    return dx;
  };
  Matrix dx = col2im(dcols);
  round_in_place(*x_format_, dx);
  // Underflow: nonzero in the col2im of the unrounded matmul result, zero
  // after the roundings (of the columns to the output format, of dx to x's).
  Mask flushed = flushed_mask(col2im(dcols_raw), dx);
  return Tensor{std::move(dx), x_format_, std::move(flushed)};
}

Mask Conv2d::gradient_cast_flushed() const {
  // Back from (batch * positions, out channels) rows to the (C, H, W) layout.
  const Mask& m = Linear::gradient_cast_flushed();
  if (m.size() == 0) return m;
  return to_image_layout(m, batch_, Eigen::Index(out_h_) * out_w_, oc_);
}

// ---- MaxPool2d ------------------------------------------------------------

MaxPool2d::MaxPool2d(std::string name, int channels, int height, int width, int size)
    : Layer(std::move(name)), c_(channels), h_(height), w_(width), s_(size) {}

Tensor MaxPool2d::forward(const Tensor& x, const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("max_pool2d"), *x.format);
  x_format_ = x.format;
  const int oh = h_ / s_, ow = w_ / s_;
  const Eigen::Index batch = x.values.rows();
  in_cols_ = x.values.cols();
  Matrix y(batch, Eigen::Index(c_) * oh * ow);
  argmax_.assign(std::size_t(y.size()), 0);
  for (Eigen::Index b = 0; b < batch; ++b)
    for (int ch = 0; ch < c_; ++ch)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double best = -std::numeric_limits<double>::infinity();
          Eigen::Index at = -1;
          for (int ky = 0; ky < s_; ++ky)
            for (int kx = 0; kx < s_; ++kx) {
              const Eigen::Index col = (Eigen::Index(ch) * h_ + oy * s_ + ky) * w_ + ox * s_ + kx;
              const double v = x.values(b, col);
              if (at < 0 || v > best || std::isnan(v)) {
                if (at >= 0 && std::isnan(best)) continue;
                best = v;
                at = col;
              }
            }
          const Eigen::Index oc = (Eigen::Index(ch) * oh + oy) * ow + ox;
          y(b, oc) = best;
          argmax_[std::size_t(oc * batch + b)] = at;
        }
  round_in_place(*f.output, y);
  return Tensor{std::move(y), f.output};
}

Tensor MaxPool2d::backward(const Tensor& dy, const StepContext&, bool need_input_grad) {
  if (!need_input_grad) return Tensor{Matrix(), x_format_};
  const Eigen::Index batch = dy.values.rows();
  Matrix dx = Matrix::Zero(batch, in_cols_);
  for (Eigen::Index oc = 0; oc < dy.values.cols(); ++oc)
    for (Eigen::Index b = 0; b < batch; ++b) dx(b, argmax_[std::size_t(oc * batch + b)]) += dy.values(b, oc);
  const Matrix raw = dx;
  round_in_place(*x_format_, dx);
  Mask flushed = flushed_mask(raw, dx);
  // Windows do not overlap: a flushed dy entry is a zero at its argmax.
  if (dy.flushed.size())
    for (Eigen::Index oc = 0; oc < dy.values.cols(); ++oc)
      for (Eigen::Index b = 0; b < batch; ++b)
        if (dy.flushed(b, oc)) flushed(b, argmax_[std::size_t(oc * batch + b)]) = true;
  return Tensor{std::move(dx), x_format_, std::move(flushed)};
}

// ---- Losses -------------------------------------------------------------

double CrossEntropyLoss::forward(const Tensor& logits, const std::vector<int>& labels,
                                 const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("cross_entropy"), *logits.format);
  const Format& c = *f.compute;
  compute_ = &c;
  logits_format_ = logits.format;
  labels_ = labels;
  const Matrix z = rounded(c, logits.values);
  const Eigen::Index batch = z.rows(), classes = z.cols();
  probabilities_.resize(batch, classes);
  std::vector<double> e(static_cast<std::size_t>(classes)), losses(static_cast<std::size_t>(batch));
  for (Eigen::Index i = 0; i < batch; ++i) {
    const double m = z.row(i).maxCoeff();
    for (Eigen::Index j = 0; j < classes; ++j)
      e[std::size_t(j)] = round_value(c, std::exp(round_value(c, z(i, j) - m)));
    const double s = sequential_sum(c, e.data(), classes);
    const double log_s = round_value(c, std::log(s));
    for (Eigen::Index j = 0; j < classes; ++j) probabilities_(i, j) = round_value(c, e[std::size_t(j)] / s);
    const int y = labels[std::size_t(i)];
    // -log softmax_y = log s - (z_y - m)
    losses[std::size_t(i)] = round_value(c, log_s - round_value(c, z(i, y) - m));
  }
  return round_value(c, sequential_sum(c, losses.data(), batch) / double(batch));
}

Tensor CrossEntropyLoss::backward(double scale, const StepContext&) {
  const Format& c = *compute_;
  const Eigen::Index batch = probabilities_.rows();
  const double seed = round_value(c, scale / double(batch));
  Matrix d = probabilities_;
  for (Eigen::Index i = 0; i < batch; ++i)
    d(i, labels_[std::size_t(i)]) = round_value(c, d(i, labels_[std::size_t(i)]) - 1.0);
  d *= seed;
  const Matrix raw = d;
  round_in_place(c, d);
  round_in_place(*logits_format_, d);
  Mask flushed = flushed_mask(raw, d);
  return Tensor{std::move(d), logits_format_, std::move(flushed)};
}

double MSELoss::forward(const Tensor& logits, const std::vector<int>& labels, const StepContext& ctx) {
  const Formats f = resolve(ctx.policy->rule("mse_loss"), *logits.format);
  const Format& c = *f.compute;
  compute_ = &c;
  logits_format_ = logits.format;
  diff_ = rounded(c, logits.values);
  for (Eigen::Index i = 0; i < diff_.rows(); ++i)
    diff_(i, labels[std::size_t(i)]) = round_value(c, diff_(i, labels[std::size_t(i)]) - 1.0);
  Matrix sq = diff_.cwiseProduct(diff_);
  round_in_place(c, sq);
  return round_value(c, sequential_sum(c, sq.data(), sq.size()) / double(sq.size()));
}

Tensor MSELoss::backward(double scale, const StepContext&) {
  const Format& c = *compute_;
  const double seed = round_value(c, 2.0 * scale / double(diff_.size()));
  Matrix d = diff_ * seed;
  const Matrix raw = d;
  round_in_place(c, d);
  round_in_place(*logits_format_, d);
  Mask flushed = flushed_mask(raw, d);
  return Tensor{std::move(d), logits_format_, std::move(flushed)};
}

}  // namespace rpsim::sim::train
