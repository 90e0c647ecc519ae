// The op core's im2col and col2im against entry-by-entry statements: each
// column entry the pixel it reads (or 0 in the padding), and each pixel's
// sum of the column entries copied from it in increasing output position,
// over every geometry a conv2d takes (stride, padding, dilation).
#include <catch2/catch.hpp>
#include <vector>

#include "finite_differences.hpp"
#include "rpsim/train/conv_op.hpp"

using namespace rpsim::sim::train;
using namespace rpsim::sim::train::testing;

namespace {

// dx(b, c, y, x): for each output position in increasing order, the entry of
// the column that reads pixel (c, y, x), if any.
std::vector<double> by_pixel(const std::vector<double>& cols, Eigen::Index batch, const ConvGeometry& g) {
  std::vector<double> dx(std::size_t(batch * g.channels * g.height * g.width), 0.0);
  for (Eigen::Index b = 0; b < batch; ++b)
    for (Eigen::Index c = 0; c < g.channels; ++c)
      for (Eigen::Index y = 0; y < g.height; ++y)
        for (Eigen::Index x = 0; x < g.width; ++x) {
          double s = 0;
          for (Eigen::Index pos = 0; pos < g.positions(); ++pos) {
            const Eigen::Index oy = pos / g.out_w(), ox = pos % g.out_w();
            const Eigen::Index dy = y + g.pad_h - oy * g.stride_h, dxx = x + g.pad_w - ox * g.stride_w;
            if (dy < 0 || dxx < 0 || dy % g.dilation_h || dxx % g.dilation_w) continue;
            const Eigen::Index ky = dy / g.dilation_h, kx = dxx / g.dilation_w;
            if (ky >= g.kernel_h || kx >= g.kernel_w) continue;
            const Eigen::Index col = (c * g.kernel_h + ky) * g.kernel_w + kx;
            s += cols[std::size_t((b * g.patch() + col) * g.positions() + pos)];
          }
          dx[std::size_t(((b * g.channels + c) * g.height + y) * g.width + x)] = s;
        }
  return dx;
}

// The geometries the tests take: padding, strides and dilations, a 1x1 kernel.
std::vector<ConvGeometry> geometries() {
  struct Case {
    int c, h, w, kh, kw, sh, sw, ph, pw, dh, dw;
  };
  std::vector<ConvGeometry> out;
  for (const Case& k : {Case{2, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1}, Case{3, 7, 7, 3, 2, 2, 1, 0, 1, 1, 1},
                        Case{1, 9, 8, 3, 3, 2, 2, 2, 1, 2, 3}, Case{2, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1},
                        Case{1, 3, 5, 3, 3, 1, 3, 2, 2, 1, 1}}) {
    ConvGeometry g;
    g.channels = k.c;
    g.height = k.h;
    g.width = k.w;
    g.kernel_h = k.kh;
    g.kernel_w = k.kw;
    g.stride_h = k.sh;
    g.stride_w = k.sw;
    g.pad_h = k.ph;
    g.pad_w = k.pw;
    g.dilation_h = k.dh;
    g.dilation_w = k.dw;
    out.push_back(g);
  }
  return out;
}

}  // namespace

TEST_CASE("train: im2col copies each column entry from its pixel, 0 in the padding", "[train][op-core]") {
  for (const ConvGeometry& g : geometries()) {
    const Eigen::Index batch = 2, pixels = g.channels * g.height * g.width;
    std::vector<double> x(std::size_t(batch * pixels));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = double(i) + 1;  // no pixel is 0
    // rpsim.torch's layouts: x (N, C, H, W), cols (N, patch, positions), both contiguous.
    std::vector<double> cols(std::size_t(batch * g.patch() * g.positions()), -7.0);
    im2col(x.data(), {pixels, 1, 0}, batch, g, cols.data(), {g.patch() * g.positions(), g.positions(), 1});
    // rpsim train's: x (batch x pixels) and cols ((batch * positions) x patch), column-major.
    std::vector<double> xt(x.size()), colst(cols.size(), -7.0);
    for (Eigen::Index b = 0; b < batch; ++b)
      for (Eigen::Index p = 0; p < pixels; ++p)
        xt[std::size_t(b + p * batch)] = x[std::size_t(b * pixels + p)];
    const Eigen::Index rows = batch * g.positions();
    im2col(xt.data(), {1, batch, 0}, batch, g, colst.data(), {g.positions(), rows, 1});
    bool same = true, padding_seen = false;
    for (Eigen::Index b = 0; b < batch; ++b)
      for (Eigen::Index c = 0; c < g.channels; ++c)
        for (Eigen::Index ky = 0; ky < g.kernel_h; ++ky)
          for (Eigen::Index kx = 0; kx < g.kernel_w; ++kx)
            for (Eigen::Index pos = 0; pos < g.positions(); ++pos) {
              const Eigen::Index oy = pos / g.out_w(), ox = pos % g.out_w();
              const Eigen::Index iy = oy * g.stride_h - g.pad_h + ky * g.dilation_h,
                                 ix = ox * g.stride_w - g.pad_w + kx * g.dilation_w;
              const bool inside = iy >= 0 && iy < g.height && ix >= 0 && ix < g.width;
              padding_seen = padding_seen || !inside;
              const double want =
                  inside ? x[std::size_t(b * pixels + (c * g.height + iy) * g.width + ix)] : 0.0;
              const Eigen::Index col = (c * g.kernel_h + ky) * g.kernel_w + kx;
              same = same && cols[std::size_t((b * g.patch() + col) * g.positions() + pos)] == want &&
                     colst[std::size_t(b * g.positions() + pos + col * rows)] == want;
            }
    CHECK(same);
    CHECK(padding_seen == (g.pad_h > 0 || g.pad_w > 0));
  }
}

TEST_CASE("train: col2im sums each pixel's patches in increasing output position", "[train][op-core]") {
  for (const ConvGeometry& g : geometries()) {
    const Eigen::Index batch = 2;
    const Matrix m = random_matrix(batch * g.patch(), g.positions(), 21);
    std::vector<double> cols(std::size_t(m.size()));
    for (Eigen::Index i = 0; i < batch * g.patch(); ++i)
      for (Eigen::Index j = 0; j < g.positions(); ++j)
        cols[std::size_t(i * g.positions() + j)] = m(i, j) * 1e8 + 1;
    std::vector<double> dx(std::size_t(batch * g.channels * g.height * g.width), -7.0);
    col2im(cols.data(), {g.patch() * g.positions(), g.positions(), 1}, batch, g, dx.data(),
           {g.channels * g.height * g.width, 1, 0});
    CHECK(dx == by_pixel(cols, batch, g));
  }
}
