// col2im (conv_op.hpp).
#include "rpsim/train/conv_op.hpp"

namespace rpsim::sim::train {

namespace {

template <class T>
void col2im_of(const T* cols, Strides cs, Eigen::Index batch, const ConvGeometry& g, double* dx, Strides ds) {
  const Eigen::Index pixels = g.channels * g.height * g.width, ow = g.out_w(), oh = g.out_h();
  for (Eigen::Index b = 0; b < batch; ++b)
    for (Eigen::Index p = 0; p < pixels; ++p) dx[b * ds.s0 + p * ds.s1] = 0.0;
  for (Eigen::Index b = 0; b < batch; ++b)
    for (Eigen::Index oy = 0; oy < oh; ++oy)
      for (Eigen::Index ox = 0; ox < ow; ++ox) {
        const Eigen::Index pos = oy * ow + ox;
        for (Eigen::Index c = 0; c < g.channels; ++c)
          for (int ky = 0; ky < g.kernel_h; ++ky) {
            const Eigen::Index iy = oy * g.stride_h - g.pad_h + ky * g.dilation_h;
            if (iy < 0 || iy >= g.height) continue;
            for (int kx = 0; kx < g.kernel_w; ++kx) {
              const Eigen::Index ix = ox * g.stride_w - g.pad_w + kx * g.dilation_w;
              if (ix < 0 || ix >= g.width) continue;
              const Eigen::Index col = (c * g.kernel_h + ky) * g.kernel_w + kx;
              dx[b * ds.s0 + ((c * g.height + iy) * g.width + ix) * ds.s1] +=
                  double(cols[b * cs.s0 + col * cs.s1 + pos * cs.s2]);
            }
          }
      }
}

}  // namespace

void col2im(const double* cols, Strides cs, Eigen::Index batch, const ConvGeometry& g, double* dx,
            Strides ds) {
  col2im_of(cols, cs, batch, g, dx, ds);
}

void col2im(const float* cols, Strides cs, Eigen::Index batch, const ConvGeometry& g, double* dx,
            Strides ds) {
  col2im_of(cols, cs, batch, g, dx, ds);
}

}  // namespace rpsim::sim::train
