// The op core's step arithmetic from Python (sim/train step_ops.hpp):
// unscaling, the gradient norm and clipping on NumPy views of the gradients,
// in place, for rpsim.torch's GradScaler and Trainer.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "bindings.hpp"
#include "rpsim/train/step_ops.hpp"

namespace rpsim::python {

namespace {

namespace train = sim::train;

// A float32 or float64 C-contiguous array's values as binary64, and back.
class Values {
 public:
  // written: store() will write the values back, so x itself must be a
  // writeable C-contiguous float32/float64 array (ensure's copy of a strided
  // view would take the results, and the caller's array would silently keep
  // its old values).
  Values(const py::handle& x, const char* what, bool written = false)
      : array_(py::array::ensure(x, py::array::c_style)) {
    if (!array_ ||
        !(py::isinstance<py::array_t<float>>(array_) || py::isinstance<py::array_t<double>>(array_)))
      throw py::type_error(fmt::format("{}: a C-contiguous float32 or float64 array is needed", what));
    if (written && (array_.ptr() != x.ptr() || !array_.writeable()))
      throw py::type_error(fmt::format(
          "{}: written in place, so a writeable C-contiguous float32 or float64 array is needed (got {})",
          what,
          array_.ptr() != x.ptr() ? "one that needs a copy: strided, or another dtype"
                                  : "a read-only array"));
    f32_ = py::isinstance<py::array_t<float>>(array_);
    values_.resize(std::size_t(array_.size()));
    if (f32_) {
      const float* p = static_cast<const float*>(array_.data());
      for (std::size_t i = 0; i < values_.size(); ++i) values_[i] = p[i];
    } else {
      const double* p = static_cast<const double*>(array_.data());
      values_.assign(p, p + values_.size());
    }
  }
  std::span<double> span() { return values_; }
  // Writes the values back into the array (it must be writeable: a tensor's
  // .numpy() view).
  void store() {
    if (f32_) {
      float* p = static_cast<float*>(array_.mutable_data());
      for (std::size_t i = 0; i < values_.size(); ++i) p[i] = float(values_[i]);
    } else {
      double* p = static_cast<double*>(array_.mutable_data());
      std::copy(values_.begin(), values_.end(), p);
    }
  }

 private:
  py::array array_;
  bool f32_ = false;
  std::vector<double> values_;
};

// A gradient array as the op core reads it in place: a C-contiguous float32
// or float64 array (the tensor's own .numpy() view), or nothing.
template <class T>
std::span<T> carrier(const py::handle& x) {
  const py::array a = py::array::ensure(x);
  if (!a || !py::isinstance<py::array_t<T>>(a) || !(a.flags() & py::array::c_style)) return {};
  if constexpr (!std::is_const_v<T>)
    if (!a.writeable()) return {};
  return {static_cast<T*>(const_cast<void*>(a.data())), std::size_t(a.size())};
}

py::tuple unscale_py(const py::list& grads, double scale, const std::vector<std::string>& formats,
                     bool masks) {
  if (formats.size() != grads.size()) throw py::value_error("one gradient format per gradient is needed");
  const double inv = train::unscale_factor(scale);
  // Every gradient that will be written is checked before any is (no half-unscaled list on an error).
  for (std::size_t i = 0; i < grads.size() && inv != 1.0; ++i)
    if (carrier<float>(grads[i]).empty() && carrier<double>(grads[i]).empty())
      Values(grads[i], fmt::format("gradient {}", i).c_str(), true);
  py::list flushed, mask_list;
  bool found = false;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const Format& f = format_arg(formats[i]);
    // The mask in the gradient's shape, its entries in C order (as the core reads them).
    const py::array g = py::array::ensure(grads[i]);
    py::array_t<bool> mask =
        masks && g ? py::array_t<bool>(std::vector<py::ssize_t>(g.shape(), g.shape() + g.ndim()))
                   : py::array_t<bool>();
    const std::span<bool> m =
        masks ? std::span<bool>(mask.mutable_data(), std::size_t(mask.size())) : std::span<bool>();
    train::Unscaled u;
    if (const auto f32 = carrier<float>(grads[i]); !f32.empty()) {
      u = train::unscale(f32, inv, f, m);
    } else if (const auto f64 = carrier<double>(grads[i]); !f64.empty()) {
      u = train::unscale(f64, inv, f, m);
    } else {  // empty, or read-only with nothing to write: a binary64 copy
      Values v(grads[i], "gradient", inv != 1.0);
      u = train::unscale(v.span(), inv, f, m);
      if (inv != 1.0) v.store();
    }
    flushed.append(u.flushed);
    if (masks) mask_list.append(mask);
    found = found || u.nonfinite;
  }
  if (masks) return py::make_tuple(flushed, found, mask_list);
  return py::make_tuple(flushed, found);
}

// fn(values) on x's values as the op core reads them: a C-contiguous float32
// or float64 array in place (a span of float or of double), anything else
// through a binary64 copy (Values' dtype check and error naming `what`).
template <class Fn>
auto read_values(const py::handle& x, const char* what, Fn&& fn) {
  if (const auto f32 = carrier<const float>(x); !f32.empty()) return fn(f32);
  if (const auto f64 = carrier<const double>(x); !f64.empty()) return fn(f64);
  Values v(x, what);
  return fn(std::span<const double>(v.span().data(), v.span().size()));
}

double grad_norm_py(const py::list& grads, const std::string& format) {
  train::GradNorm norm(format_arg(format));
  for (const auto& g : grads) read_values(g, "gradient", [&](auto values) { norm.add(values); });
  return norm.value();
}

std::int64_t count_nonfinite_py(const py::handle& x) {
  return read_values(x, "x", [](auto values) { return train::count_nonfinite(values); });
}

std::int64_t count_zero_vs_py(const py::handle& emulated, const py::handle& reference) {
  const auto size = [](const py::handle& x, const char* what) {
    const py::array a = py::array::ensure(x);
    if (!a) throw py::type_error(fmt::format("{}: an array is needed", what));
    return a.size();
  };
  if (size(emulated, "emulated") != size(reference, "reference"))
    throw py::value_error(fmt::format("emulated holds {} entries, reference {}", size(emulated, "emulated"),
                                      size(reference, "reference")));
  return read_values(emulated, "emulated", [&](auto e) {
    return read_values(reference, "reference", [&](auto r) { return train::count_zero_vs(e, r); });
  });
}

std::int64_t count_stalled_py(const py::handle& grad, const py::handle& after, const py::handle& before) {
  return read_values(grad, "grad", [&](auto g) {
    const auto count = [&](auto a, auto b) {
      if (g.size() != a.size() || a.size() != b.size())
        throw py::value_error(
            fmt::format("grad holds {} entries, after {}, before {}", g.size(), a.size(), b.size()));
      return train::count_stalled(g, a, b);
    };
    // In place where both weights are C-contiguous arrays of one dtype (the Trainer's), else as binary64.
    if (const auto a = carrier<const float>(after), b = carrier<const float>(before);
        !a.empty() && !b.empty())
      return count(a, b);
    if (const auto a = carrier<const double>(after), b = carrier<const double>(before);
        !a.empty() && !b.empty())
      return count(a, b);
    Values a(after, "after"), b(before, "before");
    return count(std::span<const double>(a.span()), std::span<const double>(b.span()));
  });
}

py::list scale_gradients_py(const py::list& grads, double coef, const std::vector<std::string>& formats) {
  if (formats.size() != grads.size()) throw py::value_error("one gradient format per gradient is needed");
  py::list flushed;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    Values v(grads[i], "gradient", true);
    flushed.append(train::scale_gradient(v.span(), coef, format_arg(formats[i])));
    v.store();
  }
  return flushed;
}

py::list accumulate_gradients_py(const py::list& sums, const py::list& grads,
                                 const std::vector<std::string>& formats, bool first) {
  if (sums.size() != grads.size() || formats.size() != grads.size())
    throw py::value_error("one sum and one format per gradient are needed");
  py::list flushed;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    Values s(sums[i], "sum", true), g(grads[i], "gradient");
    if (s.span().size() != g.span().size())
      throw py::value_error(
          fmt::format("sum {} holds {} entries, its gradient {}", i, s.span().size(), g.span().size()));
    flushed.append(train::accumulate_gradient(s.span(), g.span(), format_arg(formats[i]), first));
    s.store();
  }
  return flushed;
}

}  // namespace

void bind_step_ops(py::module_& m) {
  using py::arg;
  m.def("_unscale", &unscale_py, arg("grads"), arg("scale"), arg("formats"), arg("masks") = false,
        "Each gradient (a float32/float64 array, in place) times binary32(1 / scale), rounded to its "
        "format: (entries flushed per gradient, whether any result is inf or NaN), and with masks=True "
        "a third item: per gradient a bool array of its shape, True where a nonzero entry was flushed.");
  m.def("_count_nonfinite", &count_nonfinite_py, arg("x"),
        "The entries of a float32 or float64 array that are inf or NaN, read in place (the telemetry's "
        "nonfinite fractions).");
  m.def("_count_zero_vs", &count_zero_vs_py, arg("emulated"), arg("reference"),
        "The entries zero in `emulated` but nonzero and finite in `reference` (float32 or float64 arrays "
        "of one size, read in place): the telemetry's zero-vs-FP64 fractions.");
  m.def("_count_stalled", &count_stalled_py, arg("grad"), arg("after"), arg("before"),
        "The entries with a nonzero gradient whose weight an update left as it was (after == before; float32 "
        "or float64 arrays of one size, read in place): the telemetry's update-stalled fractions.");
  m.def("_grad_norm", &grad_norm_py, arg("grads"), arg("format"),
        "clip_grad_norm_'s L2 norm of the gradients (flat, in rpsim train's element order) in `format`.");
  m.def(
      "_clip_coefficient",
      [](double max_norm, double norm, const std::string& f) {
        return train::clip_coefficient(max_norm, norm, format_arg(f));
      },
      arg("max_norm"), arg("norm"), arg("format"), "max_norm / (norm + 1e-6) in `format`.");
  m.def("_scale_gradients", &scale_gradients_py, arg("grads"), arg("coef"), arg("formats"),
        "Each gradient (in place) times coef, rounded to its format: entries flushed per gradient.");
  m.def("_accumulate_gradients", &accumulate_gradients_py, arg("sums"), arg("grads"), arg("formats"),
        arg("first"),
        "Gradient accumulation (in place): each sum = its gradient (first) or sum + gradient, rounded to its "
        "format to nearest even: entries flushed per sum.");
}

}  // namespace rpsim::python
