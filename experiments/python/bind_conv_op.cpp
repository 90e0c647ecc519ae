// The op core's convolution pieces from Python (sim/train conv_op.hpp):
// rpsim.torch's conv1d/conv2d take their im2col patches and their input
// gradient's col2im from the functions rpsim train's Conv2d calls.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <span>
#include <string>
#include <tuple>
#include <utility>

#include "bindings.hpp"
#include "rpsim/train/conv_op.hpp"
#include "rpsim/train/tensor.hpp"

namespace rpsim::python {

namespace train = rpsim::sim::train;

namespace {

// A (N, rows, cols) float32 or float64 array as it lies (element strides),
// else its contiguous float64 copy: what col2im reads, taken with the GIL held.
struct StridedCols {
  py::array array;
  bool f32 = false;
  train::Strides strides;
  explicit StridedCols(const py::handle& in, const char* what) : array(py::array::ensure(in)) {
    bool ok = array && array.ndim() == 3 &&
              (py::isinstance<py::array_t<float>>(array) || py::isinstance<py::array_t<double>>(array));
    for (py::ssize_t d = 0; ok && d < 3; ++d) ok = array.strides(d) % array.itemsize() == 0;
    if (!ok) array = batched_array(in, what);
    f32 = py::isinstance<py::array_t<float>>(array);
    const auto item = Eigen::Index(array.itemsize());
    strides = {array.strides(0) / item, array.strides(1) / item, array.strides(2) / item};
  }
  void col2im(Eigen::Index n, const train::ConvGeometry& g, double* dx, train::Strides ds) const {
    if (f32)
      train::col2im(static_cast<const float*>(array.data()), strides, n, g, dx, ds);
    else
      train::col2im(static_cast<const double*>(array.data()), strides, n, g, dx, ds);
  }
};

train::ConvGeometry geometry_of(Eigen::Index channels, std::pair<Eigen::Index, Eigen::Index> size,
                                std::pair<int, int> kernel, std::pair<int, int> dilation,
                                std::pair<int, int> padding, std::pair<int, int> stride) {
  train::ConvGeometry g;
  g.channels = channels;
  std::tie(g.height, g.width) = size;
  std::tie(g.kernel_h, g.kernel_w) = kernel;
  std::tie(g.dilation_h, g.dilation_w) = dilation;
  std::tie(g.pad_h, g.pad_w) = padding;
  std::tie(g.stride_h, g.stride_w) = stride;
  return g;
}

// im2col of x (N, C, H, W), float32 or float64, into (N, C*kh*kw, L) of its
// dtype: F.unfold's result, from the op core's im2col.
template <class T>
py::array im2col_of(const py::array_t<T, py::array::c_style>& x, const train::ConvGeometry& g) {
  const Eigen::Index n = x.shape(0), pixels = g.channels * g.height * g.width;
  py::array_t<T> cols({py::ssize_t(n), py::ssize_t(g.patch()), py::ssize_t(g.positions())});
  {
    py::gil_scoped_release release;
    train::im2col(x.data(), {pixels, 1, 0}, n, g, cols.mutable_data(),
                  {g.patch() * g.positions(), g.positions(), 1});
  }
  return cols;
}

// x's geometry, checked to leave an output position.
train::ConvGeometry checked_geometry(const py::array& x, std::pair<int, int> kernel,
                                     std::pair<int, int> dilation, std::pair<int, int> padding,
                                     std::pair<int, int> stride) {
  if (x.ndim() != 4) throw py::value_error("x: a 4-D (N, C, H, W) array is needed");
  const train::ConvGeometry g =
      geometry_of(x.shape(1), {x.shape(2), x.shape(3)}, kernel, dilation, padding, stride);
  if (g.kernel_h < 1 || g.kernel_w < 1 || g.stride_h < 1 || g.stride_w < 1 || g.dilation_h < 1 ||
      g.dilation_w < 1 || g.pad_h < 0 || g.pad_w < 0 || g.out_h() < 1 || g.out_w() < 1)
    throw py::value_error(
        fmt::format("im2col: kernel {}x{}, stride {}x{}, dilation {}x{}, padding {}x{} on a "
                    "{}x{} image leave no output position",
                    g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w, g.pad_h,
                    g.pad_w, g.height, g.width));
  return g;
}

py::array im2col_py(const py::array& x, std::pair<int, int> kernel, std::pair<int, int> dilation,
                    std::pair<int, int> padding, std::pair<int, int> stride) {
  const train::ConvGeometry g = checked_geometry(x, kernel, dilation, padding, stride);
  if (py::isinstance<py::array_t<float>>(x))
    return im2col_of(py::array_t<float, py::array::c_style>::ensure(x), g);
  if (py::isinstance<py::array_t<double>>(x))
    return im2col_of(py::array_t<double, py::array::c_style>::ensure(x), g);
  throw py::type_error(
      fmt::format("x: dtype {} (float32 or float64 is needed)", py::str(x.dtype()).cast<std::string>()));
}

}  // namespace

std::vector<sim::Matrix> folded_patches(const py::handle& spec) {
  const auto [x_in, kernel, dilation, padding, stride] =
      spec.cast<std::tuple<py::array, std::pair<int, int>, std::pair<int, int>, std::pair<int, int>,
                           std::pair<int, int>>>();
  const train::ConvGeometry g = checked_geometry(x_in, kernel, dilation, padding, stride);
  const Eigen::Index n = x_in.shape(0), l = g.positions(), pixels = g.channels * g.height * g.width;
  std::vector<sim::Matrix> out(1);
  out[0].resize(n * l, g.patch());
  // cols(b, patch entry, position) at b * L + position + entry * (N * L): column-major, folded.
  const train::Strides cs{l, n * l, 1};
  if (py::isinstance<py::array_t<float>>(x_in)) {
    const auto x = py::array_t<float, py::array::c_style>::ensure(x_in);
    train::im2col(x.data(), {pixels, 1, 0}, n, g, out[0].data(), cs);
  } else if (py::isinstance<py::array_t<double>>(x_in)) {
    const auto x = py::array_t<double, py::array::c_style>::ensure(x_in);
    train::im2col(x.data(), {pixels, 1, 0}, n, g, out[0].data(), cs);
  } else {
    throw py::type_error(fmt::format("patches: x's dtype {} (float32 or float64 is needed)",
                                     py::str(x_in.dtype()).cast<std::string>()));
  }
  return out;
}

namespace {

// col2im of (N, C*kh*kw, L) columns into (N, C, H, W), rounded to x_format
// (nearest even) where given; with raw (the columns before the GEMM's
// output rounding), also the mask of pixels nonzero in col2im(raw) and zero
// in the result (the input gradient's underflow).
py::tuple col2im_py(const py::handle& cols_in, std::pair<Eigen::Index, Eigen::Index> size,
                    Eigen::Index channels, std::pair<int, int> kernel, std::pair<int, int> dilation,
                    std::pair<int, int> padding, std::pair<int, int> stride, const py::object& x_format,
                    const py::object& raw_in) {
  const train::ConvGeometry g = geometry_of(channels, size, kernel, dilation, padding, stride);
  // Native float32 or float64 cols (and raw) are read where they lie, at
  // their strides (rpsim.torch's gradient of F.unfold is a transposed view,
  // and raw the GEMM's own column-major result: a contiguous float64 copy of
  // either cost more than the sums); anything else as a contiguous float64 copy.
  const StridedCols cols(cols_in, "cols");
  const py::array& c = cols.array;
  if (c.shape(1) != g.patch() || c.shape(2) != g.positions())
    throw py::value_error(fmt::format("cols: expected (N, {}, {}), given (N, {}, {})", g.patch(),
                                      g.positions(), c.shape(1), c.shape(2)));
  const Eigen::Index n = c.shape(0), pixels = channels * g.height * g.width;
  const train::Strides ds{pixels, 1, 0};
  py::array_t<double> dx(
      {py::ssize_t(n), py::ssize_t(channels), py::ssize_t(g.height), py::ssize_t(g.width)});
  const Format* f = optional_format(x_format);
  py::object mask = py::none();
  {
    py::gil_scoped_release release;
    cols.col2im(n, g, dx.mutable_data(), ds);
  }
  if (f) {  // in place (a copy in, a rounded copy and a copy back were three passes)
    const std::span<double> all(dx.mutable_data(), std::size_t(n * pixels));
    const ValueRounding& round = train::nearest_rounding(*f);
    round(all, all);
  }
  if (!raw_in.is_none()) {
    const StridedCols raw(raw_in, "raw");
    for (py::ssize_t d = 0; d < 3; ++d)
      if (raw.array.shape(d) != c.shape(d)) throw py::value_error("raw: not the shape of cols");
    std::vector<double> r(std::size_t(n * pixels));
    {
      py::gil_scoped_release release;
      raw.col2im(n, g, r.data(), ds);
    }
    py::array_t<bool> flushed(
        {py::ssize_t(n), py::ssize_t(channels), py::ssize_t(g.height), py::ssize_t(g.width)});
    for (std::size_t i = 0; i < r.size(); ++i) flushed.mutable_data()[i] = r[i] != 0 && dx.data()[i] == 0;
    mask = flushed;
  }
  return py::make_tuple(dx, mask);
}

}  // namespace

void bind_conv_op(py::module_& m) {
  using py::arg;
  m.def(
      "_col2im", &col2im_py, arg("cols"), arg("size"), arg("channels"), arg("kernel"), arg("dilation"),
      arg("padding"), arg("stride"), arg("x_format") = py::none(), arg("raw") = py::none(),
      "(dx, flushed mask or None): the op core's col2im (rpsim train's Conv2d order), rounded to x_format.");
  m.def("_im2col", &im2col_py, arg("x"), arg("kernel"), arg("dilation"), arg("padding"), arg("stride"),
        "F.unfold(x, ...) for a float32/float64 (N, C, H, W) array: the op core's im2col, (N, C*kh*kw, L) "
        "of x's dtype.");
}

}  // namespace rpsim::python
