// im2col and col2im (conv_op.hpp).
#include "rpsim/train/conv_op.hpp"

#include <algorithm>

namespace rpsim::sim::train {

namespace {

// out[i] += in[i], i < n: one term into each of n pixels, a loop the
// compiler vectorises (the strided loop it did not: col2im was 4% of a
// ResNet-style step with the shadow). The same additions, so the same bits.
template <class T>
inline void add_run(const T* __restrict in, double* __restrict out, Eigen::Index n) {
  for (Eigen::Index i = 0; i < n; ++i) out[i] += double(in[i]);
}

// Each pixel's terms are added in increasing output position (oy, ox). For
// one pixel, ky and kx follow from oy and ox and fall as they rise, so
// walking (ky, kx) downward visits the terms in that same order, while the
// inner loops run along one column of cols (its positions, adjacent in
// rpsim train's and rpsim.torch's layouts) and along a row of the image.
// Walking by output position instead read a column's worth of strides apart
// for every term (col2im was 12% of an emulated ResNet-style step).
template <class T>
void col2im_of(const T* cols, Strides cs, Eigen::Index batch, const ConvGeometry& g, double* dx, Strides ds) {
  const Eigen::Index pixels = g.channels * g.height * g.width, ow = g.out_w(), oh = g.out_h();
  for (Eigen::Index b = 0; b < batch; ++b)
    for (Eigen::Index p = 0; p < pixels; ++p) dx[b * ds.s0 + p * ds.s1] = 0.0;
  for (Eigen::Index b = 0; b < batch; ++b)
    for (Eigen::Index c = 0; c < g.channels; ++c)
      for (int ky = g.kernel_h - 1; ky >= 0; --ky)
        for (int kx = g.kernel_w - 1; kx >= 0; --kx) {
          const Eigen::Index col = (c * g.kernel_h + ky) * g.kernel_w + kx;
          const T* src = cols + b * cs.s0 + col * cs.s1;
          // The output columns whose input column is inside the image.
          const Eigen::Index x0 = kx * g.dilation_w - g.pad_w;
          Eigen::Index ox_lo = 0, ox_hi = ow;
          while (ox_lo < ow && ox_lo * g.stride_w + x0 < 0) ++ox_lo;
          while (ox_hi > ox_lo && (ox_hi - 1) * g.stride_w + x0 >= g.width) --ox_hi;
          for (Eigen::Index oy = 0; oy < oh; ++oy) {
            const Eigen::Index iy = oy * g.stride_h - g.pad_h + ky * g.dilation_h;
            if (iy < 0 || iy >= g.height) continue;
            double* row = dx + b * ds.s0 + (c * g.height + iy) * g.width * ds.s1;
            const T* in = src + oy * ow * cs.s2;
            if (ds.s1 == 1 && cs.s2 == 1 && g.stride_w == 1)
              add_run(in + ox_lo, row + ox_lo + x0, ox_hi - ox_lo);  // rpsim.torch's layouts
            else
              for (Eigen::Index ox = ox_lo; ox < ox_hi; ++ox)
                row[(ox * g.stride_w + x0) * ds.s1] += double(in[ox * cs.s2]);
          }
        }
}

// Each column's stretch of one output row at a time: the positions whose
// input column is inside the image copied (a unit-stride loop in rpsim.torch's
// layouts), the rest zero.
template <class T, class Out>
void im2col_of(const T* x, Strides xs, Eigen::Index batch, const ConvGeometry& g, Out* cols, Strides cs) {
  const Eigen::Index ow = g.out_w(), oh = g.out_h();
  for (Eigen::Index b = 0; b < batch; ++b)
    for (Eigen::Index c = 0; c < g.channels; ++c)
      for (int ky = 0; ky < g.kernel_h; ++ky)
        for (int kx = 0; kx < g.kernel_w; ++kx) {
          const Eigen::Index col = (c * g.kernel_h + ky) * g.kernel_w + kx;
          Out* dst = cols + b * cs.s0 + col * cs.s1;
          const Eigen::Index x0 = kx * g.dilation_w - g.pad_w;
          Eigen::Index ox_lo = 0, ox_hi = ow;
          while (ox_lo < ow && ox_lo * g.stride_w + x0 < 0) ++ox_lo;
          while (ox_hi > ox_lo && (ox_hi - 1) * g.stride_w + x0 >= g.width) --ox_hi;
          for (Eigen::Index oy = 0; oy < oh; ++oy) {
            Out* row = dst + oy * ow * cs.s2;
            const Eigen::Index iy = oy * g.stride_h - g.pad_h + ky * g.dilation_h;
            if (iy < 0 || iy >= g.height) {
              for (Eigen::Index ox = 0; ox < ow; ++ox) row[ox * cs.s2] = Out(0);
              continue;
            }
            const T* in = x + b * xs.s0 + (c * g.height + iy) * g.width * xs.s1;
            for (Eigen::Index ox = 0; ox < ox_lo; ++ox) row[ox * cs.s2] = Out(0);
            if (cs.s2 == 1 && xs.s1 == 1 && g.stride_w == 1)
              std::copy(in + ox_lo + x0, in + ox_hi + x0, row + ox_lo);
            else
              for (Eigen::Index ox = ox_lo; ox < ox_hi; ++ox)
                row[ox * cs.s2] = Out(in[(ox * g.stride_w + x0) * xs.s1]);
            for (Eigen::Index ox = ox_hi; ox < ow; ++ox) row[ox * cs.s2] = Out(0);
          }
        }
}

}  // namespace

void im2col(const float* x, Strides xs, Eigen::Index batch, const ConvGeometry& g, float* cols, Strides cs) {
  im2col_of(x, xs, batch, g, cols, cs);
}

void im2col(const double* x, Strides xs, Eigen::Index batch, const ConvGeometry& g, double* cols,
            Strides cs) {
  im2col_of(x, xs, batch, g, cols, cs);
}

void im2col(const float* x, Strides xs, Eigen::Index batch, const ConvGeometry& g, double* cols, Strides cs) {
  im2col_of(x, xs, batch, g, cols, cs);
}

void col2im(const double* cols, Strides cs, Eigen::Index batch, const ConvGeometry& g, double* dx,
            Strides ds) {
  col2im_of(cols, cs, batch, g, dx, ds);
}

void col2im(const float* cols, Strides cs, Eigen::Index batch, const ConvGeometry& g, double* dx,
            Strides ds) {
  col2im_of(cols, cs, batch, g, dx, ds);
}

}  // namespace rpsim::sim::train
