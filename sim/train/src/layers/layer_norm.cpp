// Layer normalisation with every intermediate in the compute format.
#include <cmath>
#include <vector>

#include "common.hpp"

namespace rpsim::sim::train {
using namespace detail;

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
  for (Eigen::Index j = 0; j < n; ++j) {
    double sg = 0, sb = 0;
    for (Eigen::Index i = 0; i < d.rows(); ++i) {
      sg = rc(sg + rc(d(i, j) * xhat_(i, j)));
      sb = rc(sb + d(i, j));
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

}  // namespace rpsim::sim::train
