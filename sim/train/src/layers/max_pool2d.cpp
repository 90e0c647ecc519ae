// Max pooling, window = stride.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common.hpp"

namespace rpsim::sim::train {
using namespace detail;

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
  // Batch innermost: x is batch x features, column-major, so a window entry
  // is one contiguous column over the batch (batch outermost read every
  // entry a column apart: 9% of a CNN step). Each (b, window) still visits
  // its entries in the same order, so ties and NaNs pick the same one.
  std::vector<double> best(static_cast<std::size_t>(batch));
  std::vector<Eigen::Index> at(static_cast<std::size_t>(batch));
  for (int ch = 0; ch < c_; ++ch)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        std::fill(best.begin(), best.end(), -std::numeric_limits<double>::infinity());
        std::fill(at.begin(), at.end(), Eigen::Index(-1));
        for (int ky = 0; ky < s_; ++ky)
          for (int kx = 0; kx < s_; ++kx) {
            const Eigen::Index col = (Eigen::Index(ch) * h_ + oy * s_ + ky) * w_ + ox * s_ + kx;
            const double* xs = x.values.col(col).data();
            for (Eigen::Index b = 0; b < batch; ++b) {
              const double v = xs[b];
              const std::size_t i = std::size_t(b);
              if (at[i] < 0 || v > best[i] || std::isnan(v)) {
                if (at[i] >= 0 && std::isnan(best[i])) continue;
                best[i] = v;
                at[i] = col;
              }
            }
          }
        const Eigen::Index oc = (Eigen::Index(ch) * oh + oy) * ow + ox;
        for (Eigen::Index b = 0; b < batch; ++b) {
          y(b, oc) = best[std::size_t(b)];
          argmax_[std::size_t(oc * batch + b)] = at[std::size_t(b)];
        }
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

}  // namespace rpsim::sim::train
