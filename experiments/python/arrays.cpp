// NumPy inputs of the Python module: dtype and layout checks, and the
// rounding keywords.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "rpsim/formats/explain.hpp"

namespace rpsim::python {

namespace {

// An ndarray, or an object NumPy reads as one with its own dtype (the array
// interface, the buffer protocol: a CPU torch tensor, a memoryview).
bool array_like(py::handle x) {
  return py::isinstance<py::array>(x) || py::hasattr(x, "__array__") ||
         py::hasattr(x, "__array_interface__") || PyObject_CheckBuffer(x.ptr());
}

std::string dtype_name(const py::array& a) {
  return py::str(a.dtype()).cast<std::string>();
}

// array_t::ensure and array::ensure return null (the NumPy error cleared)
// for what NumPy cannot read.
template <class Array>
Array checked(Array a, py::handle x, const char* what, const char* as) {
  if (!a)
    throw py::type_error(fmt::format("{}: {} cannot be read as {}", what,
                                     py::str(py::type::handle_of(x)).cast<std::string>(), as));
  return a;
}

}  // namespace

void require_copy(const py::handle& copy, const py::array& from, const char* what) {
  if (copy) return;
  std::string shape;
  double bytes = 8;
  for (py::ssize_t i = 0; i < from.ndim(); ++i) {
    shape += fmt::format("{}{}", i ? " x " : "", from.shape(i));
    bytes *= double(from.shape(i));
  }
  PyErr_SetString(PyExc_MemoryError,
                  fmt::format("{}: its contiguous copy ({}, {:.3g} GB as float64) could not be allocated",
                              what, shape, bytes / 1e9)
                      .c_str());
  throw py::error_already_set();
}

py::array float_array(py::handle x, const char* what) {
  using f64 = py::array_t<double, py::array::c_style | py::array::forcecast>;
  using f32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
  if (!array_like(x)) return checked(f64::ensure(x), x, what, "float64 numbers");  // a number or a list
  py::array a = checked(py::array::ensure(x), x, what, "an array");
  // A copy only when not C-contiguous (or not native float32/float64).
  const auto copy = [&](py::array c) {
    require_copy(c, a, what);
    return c;
  };
  // array_t's check compares dtypes with PyArray_EquivTypes: native byte order only.
  if (py::isinstance<py::array_t<double>>(a)) return copy(f64::ensure(a));
  if (py::isinstance<py::array_t<float>>(a)) return copy(f32::ensure(a));
  const char kind = a.dtype().kind();
  if (kind == 'f' && a.itemsize() <= 4) return copy(f32::ensure(a));  // float16: exact in float32
  if (kind == 'f' && a.itemsize() == 8) return copy(f64::ensure(a));  // float64 in the other byte order
  throw py::type_error(
      fmt::format("{}: dtype {} is not float16, float32 or float64 (convert it with "
                  "x.astype(numpy.float64))",
                  what, dtype_name(a)));
}

F64 batched_array(py::handle x, const char* what) {
  const py::array given = float_array(x, what);
  F64 a = F64::ensure(given);
  require_copy(a, given, what);
  if (a.ndim() != 3)
    throw py::value_error(
        fmt::format("{}: must be a 3-D (batch, rows, cols) array, got {}-D", what, a.ndim()));
  return a;
}

py::dtype bits_dtype(const Format& fmt) {
  if (fmt.bits <= 8) return py::dtype::of<std::uint8_t>();
  if (fmt.bits <= 16) return py::dtype::of<std::uint16_t>();
  if (fmt.bits <= 32) return py::dtype::of<std::uint32_t>();
  return py::dtype::of<std::uint64_t>();
}

py::array bits_array(py::handle bits, const Format& fmt, const char* what) {
  py::array a = checked(py::array::ensure(bits), bits, what, "an array of integers");
  const char kind = a.dtype().kind();
  if (kind != 'u' && kind != 'i')
    throw py::type_error(fmt::format("{}: dtype {} is not an integer type (encodings of {} are {})", what,
                                     dtype_name(a), fmt.name, py::str(bits_dtype(fmt)).cast<std::string>()));
  // A value outside [0, 2^bits) is not an encoding: say so rather than drop bits.
  const std::uint64_t mask = fmt.bit_mask();
  if (a.size() > 0) {
    if (kind == 'i') {
      const auto low = a.attr("min")().cast<std::int64_t>();
      if (low < 0)
        throw py::value_error(
            fmt::format("{}: negative value {} is not an encoding of {}", what, low, fmt.name));
    }
    if (a.itemsize() * 8 > fmt.bits) {
      const py::object top = a.attr("max")();
      if (top.cast<std::uint64_t>() > mask)
        throw py::value_error(fmt::format("{}: value {} is not an encoding of {} ({} bits)", what,
                                          top.cast<std::uint64_t>(), fmt.name, fmt.bits));
    }
  }
  const py::dtype want = bits_dtype(fmt);
  return py::array::ensure(a.attr("astype")(want, py::arg("copy") = false), py::array::c_style);
}

Rounding make_rounding(const std::string& rounding, const py::object& stochastic_bits, bool ftz, bool daz,
                       const py::object& saturate) {
  Rounding r;
  r.mode = parse_rounding(rounding);  // FormatError -> ValueError, listing the names
  const std::uint64_t bits = u64_arg(stochastic_bits, "stochastic_bits");
  if (bits < 1 || bits > 64)
    throw py::value_error(fmt::format("stochastic_bits = {}: must be 1 to 64", bits));
  r.stochastic_bits = int(bits);
  r.flush_subnormal_outputs = ftz;
  r.flush_subnormal_inputs = daz;
  if (!saturate.is_none()) {
    if (!py::isinstance<py::bool_>(saturate))
      throw py::type_error(
          fmt::format("saturate = {}: must be None, True or False", py::repr(saturate).cast<std::string>()));
    // Infinity falls back to NaN, then to saturation, where the format lacks it (round.cpp).
    r.overflow = saturate.cast<bool>() ? Overflow::saturate : Overflow::infinity;
  }
  return r;
}

py::list flag_list(Flags flags) {
  py::list names;
  if (flags != 0)
    for (const py::handle name : py::str(flag_names(flags)).attr("split")()) names.append(name);
  return names;
}

const Format& format_arg(const std::string& spec) {
  return rpsim::format(spec);
}

const Format& format_arg(const py::object& spec) {
  if (spec.is_none())
    throw py::value_error("format = None: name a format (binary16, bf16, e4m3, ...) or give a spec (e5m10)");
  if (!py::isinstance<py::str>(spec))
    throw py::type_error(fmt::format("format = {}: expected a format name or spec string",
                                     py::repr(spec).cast<std::string>()));
  return rpsim::format(spec.cast<std::string>());
}

std::uint64_t u64_arg(const py::object& value, const char* name) {
  const std::string text = py::repr(value).cast<std::string>();
  if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value))
    throw py::type_error(fmt::format("{} = {}: expected an integer", name, text));
  // PyLong_AsUnsignedLongLong refuses negative and too large values (OverflowError).
  const unsigned long long v = PyLong_AsUnsignedLongLong(value.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    throw py::value_error(fmt::format("{} = {}: must be an integer from 0 to 2**64 - 1", name, text));
  }
  return v;
}

py::array empty_like(const py::array& like, const py::dtype& dtype) {
  std::vector<py::ssize_t> shape(like.shape(), like.shape() + like.ndim());
  return py::array(dtype, shape);
}

py::object unwrap_0d(py::array a) {
  if (a.ndim() == 0) return a[py::tuple()];
  return a;
}

namespace {

// One (rows x cols) item at element strides (rs, cs), converted to the core's
// binary64 column-major carrier in one pass (out: rows x cols, or a block of
// a taller matrix). A column-major one (a transposed view: nn.Linear's
// weight as B) is a straight widening copy, where torch's contiguous copy of
// the view cost a transpose more.
template <class T, class Out>
void item_into(const T* p, Eigen::Index r, Eigen::Index c, Eigen::Index rs, Eigen::Index cs, Out&& out) {
  if (rs == 1 || r == 1) {
    using Col = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
    out = Eigen::Map<const Col, 0, Eigen::OuterStride<>>(p, r, c, Eigen::OuterStride<>(c == 1 ? r : cs))
              .template cast<double>();
    return;
  }
  copy_tiled(p, rs, cs, out.data(), Eigen::Index(1), Eigen::Index(out.outerStride()), r, c);
}

template <class T>
sim::Matrix item(const T* p, Eigen::Index r, Eigen::Index c, Eigen::Index rs, Eigen::Index cs) {
  sim::Matrix m(r, c);
  item_into(p, r, c, rs, cs, m);
  return m;
}

// A (batch, rows, cols) C-contiguous array of `ms` as T. float32 where the
// caller's tensor is float32: the same nearest-even conversion as torch's
// .to(float32), done in the transposing pass instead of a pass of its own.
// M: the carrier (a binary64 Matrix, or a Mask stacked as bool).
template <class T = double, class M = sim::Matrix>
py::array_t<T> stacked(const std::vector<M>& ms) {
  const py::ssize_t batch = py::ssize_t(ms.size()), r = ms.empty() ? 0 : ms[0].rows(),
                    c = ms.empty() ? 0 : ms[0].cols();
  py::array_t<T> out({batch, r, c});
  T* dst = out.mutable_data();
  for (py::ssize_t i = 0; i < batch; ++i)
    copy_tiled(ms[std::size_t(i)].data(), Eigen::Index(1), Eigen::Index(r), dst + i * r * c, Eigen::Index(c),
               Eigen::Index(1), r, c);
  return out;
}

}  // namespace

// Matrices of a (batch, rows, cols) float32 or float64 array, read where it
// lies at its strides (a view of a tensor needs no contiguous copy).
std::vector<sim::Matrix> matrices(const py::handle& x, const char* what, bool fold) {
  py::array a = py::array::ensure(x);
  if (!a || a.ndim() != 3)
    throw py::value_error(
        fmt::format("{}: a 3-D (batch, rows, cols) float32 or float64 array is needed", what));
  const bool f32 = py::isinstance<py::array_t<float>>(a), f64 = py::isinstance<py::array_t<double>>(a);
  if (!f32 && !f64)
    throw py::type_error(fmt::format("{}: dtype {} (float32 or float64 is needed)", what,
                                     py::str(a.dtype()).cast<std::string>()));
  bool usable = true;
  for (py::ssize_t d = 0; d < 3; ++d)
    usable = usable && a.strides(d) >= 0 && a.strides(d) % a.itemsize() == 0;
  if (!usable) a = py::array::ensure(x, py::array::c_style);
  const py::ssize_t batch = a.shape(0), r = a.shape(1), c = a.shape(2), item_size = a.itemsize();
  const Eigen::Index bs = a.strides(0) / item_size, rs = a.strides(1) / item_size,
                     cs = a.strides(2) / item_size;
  const auto one = [&](py::ssize_t i) {
    return f32 ? item(static_cast<const float*>(a.data()) + i * bs, r, c, rs, cs)
               : item(static_cast<const double*>(a.data()) + i * bs, r, c, rs, cs);
  };
  if (fold && batch > 1) {  // one (batch * rows) x cols matrix, item i's rows at i * rows
    // Sized in place: vector(1, Matrix(n, c)) copied an uninitialised
    // im2col-sized matrix (4.5% of a ResNet-style step).
    std::vector<sim::Matrix> out(1);
    out[0].resize(batch * r, c);
    for (py::ssize_t i = 0; i < batch; ++i) {
      auto block = out[0].middleRows(i * r, r);
      if (f32)
        item_into(static_cast<const float*>(a.data()) + i * bs, r, c, rs, cs, block);
      else
        item_into(static_cast<const double*>(a.data()) + i * bs, r, c, rs, cs, block);
    }
    return out;
  }
  std::vector<sim::Matrix> out(static_cast<std::size_t>(batch));
  for (py::ssize_t i = 0; i < batch; ++i) out[std::size_t(i)] = one(i);
  return out;
}

sim::Matrix matrix_of(const py::array& a) {
  if (a.ndim() != 2 || !(a.flags() & py::array::c_style))
    throw std::logic_error("matrix_of: a 2-D C-contiguous array is needed (float_array's)");
  const Eigen::Index r = a.shape(0), c = a.shape(1);
  if (py::isinstance<py::array_t<float>>(a)) return item(static_cast<const float*>(a.data()), r, c, c, 1);
  if (py::isinstance<py::array_t<double>>(a)) return item(static_cast<const double*>(a.data()), r, c, c, 1);
  throw std::logic_error("matrix_of: float32 or float64 is needed (float_array's)");
}

// One tiled pass (Eigen's transposing assignment read the column-major source
// with a stride of a column per element).
py::array to_numpy(const sim::Matrix& m) {
  py::array_t<double> out({m.rows(), m.cols()});
  copy_tiled(m.data(), Eigen::Index(1), m.rows(), out.mutable_data(), m.cols(), Eigen::Index(1), m.rows(),
             m.cols());
  return out;
}

py::array stacked_as(const std::vector<sim::Matrix>& ms, bool f32) {
  return f32 ? py::array(stacked<float>(ms)) : py::array(stacked<double>(ms));
}

py::array stacked_taken(std::vector<sim::Matrix>&& ms) {
  if (ms.size() != 1) return stacked_as(ms, false);
  auto* m = new sim::Matrix(std::move(ms[0]));
  py::capsule owner(m, [](void* p) { delete static_cast<sim::Matrix*>(p); });
  const auto item = py::ssize_t(sizeof(double));
  return py::array_t<double>({py::ssize_t(1), py::ssize_t(m->rows()), py::ssize_t(m->cols())},
                             {item * m->size(), item, item * m->rows()}, m->data(), owner);
}

py::array column_major_as(std::vector<sim::Matrix>&& ms, bool f32) {
  if (ms.size() != 1) return stacked_as(ms, f32);
  if (!f32) return stacked_taken(std::move(ms));
  const sim::Matrix& m = ms[0];
  const auto item = py::ssize_t(sizeof(float));
  py::array_t<float> out({py::ssize_t(1), py::ssize_t(m.rows()), py::ssize_t(m.cols())},
                         {item * m.size(), item, item * m.rows()});
  Eigen::Map<Eigen::MatrixXf>(out.mutable_data(), m.rows(), m.cols()) = m.cast<float>();
  return out;
}

py::array stacked_in(std::vector<sim::Matrix>&& ms, bool f32, bool column_major) {
  return column_major ? column_major_as(std::move(ms), f32) : stacked_as(ms, f32);
}

py::array_t<bool> stacked_mask(const std::vector<Mask>& ms, bool column_major) {
  if (column_major && ms.size() == 1) {
    const py::ssize_t r = ms[0].rows(), c = ms[0].cols();
    py::array_t<bool> out({py::ssize_t(1), r, c}, {r * c, py::ssize_t(1), r});
    std::copy_n(ms[0].data(), ms[0].size(), out.mutable_data());
    return out;
  }
  return stacked<bool>(ms);
}

}  // namespace rpsim::python
