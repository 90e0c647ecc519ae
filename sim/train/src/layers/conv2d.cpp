// 2-D convolution: im2col, the Linear core, col2im.
#include <stdexcept>
#include <string>

#include "common.hpp"
#include "rpsim/train/conv_op.hpp"

namespace rpsim::sim::train {
using namespace detail;

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
  // Channel outermost: each channel's rows are read down their column (the
  // channel innermost read them a whole column apart).
  for (Eigen::Index o = 0; o < channels; ++o)
    for (Eigen::Index b = 0; b < batch; ++b)
      for (Eigen::Index p = 0; p < positions; ++p) out(b, o * positions + p) = rows(b * positions + p, o);
  return out;
}

}  // namespace

ConvGeometry Conv2d::geometry() const {
  ConvGeometry g;
  g.channels = c_;
  g.height = h_;
  g.width = w_;
  g.kernel_h = g.kernel_w = k_;
  g.pad_h = g.pad_w = pad_;
  return g;
}

Tensor Conv2d::forward(const Tensor& x, const StepContext& ctx) {
  const Eigen::Index batch = x.values.rows();
  if (x.values.cols() != Eigen::Index(c_) * h_ * w_)
    throw std::invalid_argument(name() + ": expected " + std::to_string(c_ * h_ * w_) + " input features");
  batch_ = batch;
  x_format_ = x.format;
  const Eigen::Index positions = Eigen::Index(out_h_) * out_w_;
  // im2col (the op core's): row b * positions + oy * out_w + ox, column
  // (ch * k + ky) * k + kx of the column-major matrix holds x(b, (ch * h + iy)
  // * w + ix), zero where that is padding; x's rows are images.
  // x is cast as the GEMM casts its A first where that cast is entry by
  // entry (GemmOp::entrywise_cast): a k*k-th of the roundings, the same bits.
  const Format* cast = entrywise_cast(*x.format, ctx);
  const Matrix xc = cast ? rounded(*cast, x.values) : Matrix();
  Matrix cols(batch * positions, Eigen::Index(c_) * k_ * k_);
  train::im2col((cast ? xc : x.values).data(), {1, batch, 0}, batch, geometry(), cols.data(),
                {positions, cols.rows(), 1});
  const Formats f = resolve(ctx.policy->rule("conv2d"), *x.format);
  const Matrix out = core_forward(cols, cast ? *cast : *x.format, ctx);
  return Tensor{to_image_layout(out, batch, positions, oc_), f.output};
}

Tensor Conv2d::backward(const Tensor& dy, const StepContext& ctx, bool need_input_grad) {
  const Eigen::Index positions = Eigen::Index(out_h_) * out_w_;
  Matrix d(batch_ * positions, oc_);
  for (int o = 0; o < oc_; ++o)
    for (Eigen::Index b = 0; b < batch_; ++b)
      for (Eigen::Index p = 0; p < positions; ++p) d(b * positions + p, o) = dy.values(b, o * positions + p);
  Matrix dcols_raw;
  const Matrix dcols = core_backward(d, ctx, need_input_grad, &dcols_raw);
  if (!need_input_grad) return Tensor{Matrix(), x_format_};
  // col2im (the op core's): overlapping patches summed in binary64; the
  // columns are (batch * positions) x patch, column-major.
  const ConvGeometry g = geometry();
  auto to_image = [&](const Matrix& cols) {
    Matrix dx(batch_, Eigen::Index(c_) * h_ * w_);
    train::col2im(cols.data(), {positions, cols.rows(), 1}, batch_, g, dx.data(), {1, batch_, 0});
    return dx;
  };
  Matrix dx = to_image(dcols);
  round_in_place(*x_format_, dx);
  // Underflow: nonzero in the col2im of the unrounded matmul result, zero
  // after the roundings (of the columns to the output format, of dx to x's).
  Mask flushed = flushed_mask(to_image(dcols_raw), dx);
  return Tensor{std::move(dx), x_format_, std::move(flushed)};
}

Mask Conv2d::gradient_cast_flushed() const {
  // Back from (batch * positions, out channels) rows to the (C, H, W) layout.
  const Mask& m = Linear::gradient_cast_flushed();
  if (m.size() == 0) return m;
  return to_image_layout(m, batch_, Eigen::Index(out_h_) * out_w_, oc_);
}

}  // namespace rpsim::sim::train
