// Layer normalisation with every intermediate in the compute format.
#include <xmmintrin.h>

#include <cmath>
#include <vector>

#include "common.hpp"

namespace rpsim::sim::train {
using namespace detail;

namespace {

// dgamma(j) = sum over rows of d(i, j) * xhat(i, j), dbeta(j) = sum of d(i,
// j), in row order, each product and sum rounded to c (by rc). d and xhat
// are values of c. In binary32 that is float arithmetic (the product of two
// binary32 values is exact in binary64, and rounding a binary64 sum of two of
// them to binary32 equals rounding the exact sum, 53 >= 2 * 24 + 2), one
// float add of latency per term instead of a rounding call; in binary64
// there is nothing to round.
void gain_and_bias_grads(const Format& c, const ValueRounding& rc, const Matrix& d, const Matrix& xhat,
                         Matrix& dgamma, Matrix& dbeta) {
  const bool f32 = c == formats::binary32(), f64 = c == formats::binary64();
  for (Eigen::Index j = 0; j < d.cols(); ++j) {
    const double *dj = d.col(j).data(), *xj = xhat.col(j).data();
    double sg = 0, sb = 0;
    if (f32) {
      float g = 0, b = 0;
      for (Eigen::Index i = 0; i < d.rows(); ++i) {
        g += float(dj[i]) * float(xj[i]);
        b += float(dj[i]);
      }
      sg = g;
      sb = b;
    } else if (f64) {
      for (Eigen::Index i = 0; i < d.rows(); ++i) {
        sg += dj[i] * xj[i];
        sb += dj[i];
      }
    } else {
      for (Eigen::Index i = 0; i < d.rows(); ++i) {
        sg = rc(sg + rc(dj[i] * xj[i]));
        sb = rc(sb + dj[i]);
      }
    }
    dgamma(0, j) = sg;
    dbeta(0, j) = sb;
  }
}

// The forward's arithmetic in binary32 for every row at once, column by
// column: each row's sums still run in column order, but the rows' chains
// advance side by side in float vectors, where the row walk over
// column-major data made one strided load and one rounding call per
// operation (LayerNorm was 3% of a GPT-style step). Every operation is the
// binary32 one the generic walk rounds to: a binary64 +, -, * or / of two
// binary32 values rounded once to binary32 is the binary32 operation
// (53 >= 2 * 24 + 2, Figueroa 1995); var + eps and the reciprocal square
// root stay in binary64 per row, as there. False (nothing kept) where an
// entry is not finite in or out: the generic walk then gives the NaNs and
// infinities their payloads and signs; and where the hardware would not
// round as binary32's nearest even (MXCSR: another mode, FTZ or DAZ, as
// torch.set_flush_denormal(True) sets) or n is not a binary32 value.
bool normalise_binary32(const Matrix& xc, const Matrix& g, const Matrix& b, double eps, Matrix& xhat,
                        Eigen::VectorXd& rstd, Matrix& y) {
  const Eigen::Index rows = xc.rows(), n = xc.cols();
  constexpr unsigned kModeFtzDaz = 0x6000 | 0x8000 | 0x0040;
  if (n == 0 || n > (Eigen::Index(1) << 24) || (_mm_getcsr() & kModeFtzDaz) != 0 || !xc.allFinite())
    return false;
  const Eigen::MatrixXf x = xc.cast<float>();  // exact: values of binary32
  Eigen::ArrayXf acc = x.col(0).array();
  for (Eigen::Index j = 1; j < n; ++j) acc += x.col(j).array();
  const Eigen::ArrayXf mean = acc / float(n);
  Eigen::MatrixXf d(rows, n);
  for (Eigen::Index j = 0; j < n; ++j) d.col(j) = x.col(j).array() - mean;
  acc = d.col(0).array().square();
  for (Eigen::Index j = 1; j < n; ++j) acc += d.col(j).array().square();
  Eigen::ArrayXf r = acc / float(n);
  for (Eigen::Index i = 0; i < rows; ++i) r(i) = float(1.0 / std::sqrt(double(float(double(r(i)) + eps))));
  for (Eigen::Index j = 0; j < n; ++j) {
    const Eigen::ArrayXf xh = d.col(j).array() * r;
    xhat.col(j) = xh.cast<double>();
    y.col(j) = (xh * float(g(0, j)) + float(b(0, j))).cast<double>();
  }
  rstd = r.cast<double>();
  return r.allFinite() && xhat.allFinite() && y.allFinite();
}

}  // namespace

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
  const ValueRounding& rc = nearest_rounding(c);
  x_format_ = x.format;
  compute_ = &c;
  const Matrix xc = rounded(c, x.values);
  const Eigen::Index n = xc.cols();
  const Matrix g = rounded(c, gamma.value), b = rounded(c, beta.value);
  xhat_.resize(xc.rows(), n);
  rstd_.resize(xc.rows());
  Matrix y(xc.rows(), n);
  if (c == formats::binary32() && normalise_binary32(xc, g, b, eps_, xhat_, rstd_, y)) {
    round_in_place(*f.output, y);
    return Tensor{std::move(y), f.output};
  }
  std::vector<double> row(static_cast<std::size_t>(n)), sq(static_cast<std::size_t>(n));
  for (Eigen::Index i = 0; i < xc.rows(); ++i) {
    for (Eigen::Index j = 0; j < n; ++j) row[std::size_t(j)] = xc(i, j);
    const double mean = rc(sequential_sum(c, row.data(), n) / double(n));
    for (Eigen::Index j = 0; j < n; ++j) {
      row[std::size_t(j)] = rc(xc(i, j) - mean);
      sq[std::size_t(j)] = rc(row[std::size_t(j)] * row[std::size_t(j)]);
    }
    const double var = rc(sequential_sum(c, sq.data(), n) / double(n));
    const double rstd = rc(1.0 / std::sqrt(rc(var + eps_)));
    rstd_(i) = rstd;
    for (Eigen::Index j = 0; j < n; ++j) {
      const double xh = rc(row[std::size_t(j)] * rstd);
      xhat_(i, j) = xh;
      y(i, j) = rc(rc(xh * g(0, j)) + b(0, j));
    }
  }
  round_in_place(*f.output, y);
  return Tensor{std::move(y), f.output};
}

Tensor LayerNorm::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  const PrecisionPolicy& pol = *ctx.policy;
  const Format& c = *compute_;
  const ValueRounding& rc = nearest_rounding(c);
  const Matrix d = rounded(c, dy.values);
  const Eigen::Index n = d.cols();
  Matrix dgamma(1, n), dbeta(1, n);
  gain_and_bias_grads(c, rc, d, xhat_, dgamma, dbeta);
  gamma.grad = rounded(*pol.gradients, dgamma);
  beta.grad = rounded(*pol.gradients, dbeta);
  gamma.grad_underflow = count_flushed(dgamma, gamma.grad);
  beta.grad_underflow = count_flushed(dbeta, beta.grad);
  if (!need_input_grad) return Tensor{Matrix(), x_format_};
  Matrix dx(d.rows(), n);
  Eigen::ArrayXd dxhat(n);  // one row's, allocated once
  for (Eigen::Index i = 0; i < d.rows(); ++i) {
    dxhat = d.row(i).transpose().array() * gamma.value.row(0).transpose().array();
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

}  // namespace rpsim::sim::train
