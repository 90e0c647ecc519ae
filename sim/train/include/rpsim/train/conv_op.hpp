// The op core's convolution pieces around the GEMM op: the geometry of a 2-D
// convolution (kernel, stride, padding, dilation), im2col (the GEMM's
// operand: a copy, no arithmetic) and col2im, the input gradient's sum of
// overlapping patches, written once for rpsim train's Conv2d and for
// rpsim.torch's conv1d/conv2d.
#pragma once

#include <Eigen/Core>
#include <cstdint>

namespace rpsim::sim::train {

struct ConvGeometry {
  Eigen::Index channels = 0, height = 0, width = 0;  // of one input image
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  Eigen::Index out_h() const { return (height + 2 * pad_h - dilation_h * (kernel_h - 1) - 1) / stride_h + 1; }
  Eigen::Index out_w() const { return (width + 2 * pad_w - dilation_w * (kernel_w - 1) - 1) / stride_w + 1; }
  Eigen::Index positions() const { return out_h() * out_w(); }
  Eigen::Index patch() const { return channels * kernel_h * kernel_w; }  // entries of one column
};

// Where the entries of a strided array are: element (i, j, k) at
// data[i * s0 + j * s1 + k * s2].
struct Strides {
  Eigen::Index s0 = 0, s1 = 0, s2 = 0;
};

// col2im: dx(b, c, y, x) = the sum of every column entry cols(b, (c, ky, kx),
// position) that im2col copied from pixel (c, y, x), added in binary64 in
// the order of increasing output position (rpsim train's Conv2d; F.fold adds
// in another order, which binary64 sums of binary64 terms can tell apart).
// cols: (batch, patch, positions) at `cs`; dx: (batch, channels * height *
// width), zero-filled here, at `ds` (element (b, pixel, 0)).
// cols may hold binary32 values (rpsim.torch's float32 gradients, read where
// they lie: widening is exact, the sums the same).
void col2im(const double* cols, Strides cs, Eigen::Index batch, const ConvGeometry& g, double* dx,
            Strides ds);
void col2im(const float* cols, Strides cs, Eigen::Index batch, const ConvGeometry& g, double* dx, Strides ds);

// im2col: cols(b, (c, ky, kx), (oy, ox)) = x(b, c, iy, ix) at iy = oy *
// stride_h - pad_h + ky * dilation_h (ix likewise), 0 where that is padding;
// every entry of cols written. x: (batch, channels * height * width) at `xs`
// (element (b, pixel, 0)); cols: (batch, patch, positions) at `cs`. The
// entries of x are copied as they are (float32 into float32: F.unfold's
// result, which it replaces in rpsim.torch, where it was 8% of a
// ResNet-style step; binary64 in rpsim train).
void im2col(const float* x, Strides xs, Eigen::Index batch, const ConvGeometry& g, float* cols, Strides cs);
void im2col(const double* x, Strides xs, Eigen::Index batch, const ConvGeometry& g, double* cols, Strides cs);
// float32 entries widened (exactly) into a binary64 cols: the GEMM op's
// carrier, written in place of a float32 copy it would widen again
// (rpsim.torch's conv2d, bind_conv_op.cpp's folded_patches).
void im2col(const float* x, Strides xs, Eigen::Index batch, const ConvGeometry& g, double* cols, Strides cs);

}  // namespace rpsim::sim::train
