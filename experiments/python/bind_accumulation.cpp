// rpsim.gemm: D = A B + C under an accumulation model (sim/accumulation
// gemm.hpp), the model named by the same spec strings (or JSON objects) as
// `rpsim gemm` and training configs.
#include <fmt/format.h>
#include <omp.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/io/process.hpp"

namespace rpsim::python {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

sim::AccumulationModel model_arg(const py::object& model) {
  try {
    if (py::isinstance<py::str>(model)) return sim::AccumulationModel::parse(model.cast<std::string>());
    if (py::isinstance<py::dict>(model)) {
      const auto text = py::module_::import("json").attr("dumps")(model).cast<std::string>();
      return sim::AccumulationModel::from_json(nlohmann::json::parse(text));
    }
  } catch (const std::invalid_argument& e) {
    throw py::value_error(fmt::format("model: {}", e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw py::value_error(fmt::format("model: {}", e.what()));
  }
  throw py::type_error("model: must be a spec string ('tc:h100:fp16:fp32') or a dict ({'kind': 'tc', ...})");
}

// A 2-D array as the column-major Eigen matrix sim::gemm takes (one copy).
sim::Matrix matrix_arg(py::handle x, const char* what) {
  const py::array a = float_array(x, what);
  if (a.ndim() != 2)
    throw py::value_error(fmt::format("{}: must be a 2-D array, got {} dimensions", what, a.ndim()));
  const auto d = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
  return Eigen::Map<const RowMajor>(d.data(), d.shape(0), d.shape(1));
}

py::array to_numpy(const sim::Matrix& m) {
  py::array_t<double> out({m.rows(), m.cols()});
  Eigen::Map<RowMajor>(out.mutable_data(), m.rows(), m.cols()) = m;
  return out;
}

namespace {

// `m` rounded to `fmt` (RNE), or checked to hold values of `fmt` already.
sim::Matrix in_format(const sim::Matrix& m, const Format& fmt, bool round, const char* what) {
  const sim::Matrix r = sim::round_to_format(m, fmt);
  if (round) return r;
  for (Eigen::Index j = 0; j < m.cols(); ++j)
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      if (!(r(i, j) == m(i, j) || (std::isnan(r(i, j)) && std::isnan(m(i, j)))))
        throw py::value_error(fmt::format("{}[{}, {}] = {} is not a value of {} (round_inputs=False)", what,
                                          i, j, m(i, j), fmt.name));
  return m;
}

int threads_arg(int threads) {
  io::check_threads(threads, "threads =", true);  // std::invalid_argument -> ValueError
  return threads == 0 ? omp_get_max_threads() : threads;
}

py::array gemm_py(py::handle a, py::handle b, const py::object& c, const py::object& model_spec, int threads,
                  bool round_inputs) {
  const sim::AccumulationModel model = model_arg(model_spec);
  const Format& in = model.input_format();
  const sim::Matrix ma = in_format(matrix_arg(a, "A"), in, round_inputs, "A");
  const sim::Matrix mb = in_format(matrix_arg(b, "B"), in, round_inputs, "B");
  if (ma.cols() != mb.rows())
    throw py::value_error(
        fmt::format("A is {}x{} but B is {}x{}", ma.rows(), ma.cols(), mb.rows(), mb.cols()));
  sim::Matrix mc = sim::Matrix::Zero(ma.rows(), mb.cols());
  if (!c.is_none()) {
    mc = in_format(matrix_arg(c, "C"), model.output_format(), round_inputs, "C");
    if (mc.rows() != ma.rows() || mc.cols() != mb.cols())
      throw py::value_error(
          fmt::format("C is {}x{} but A B is {}x{}", mc.rows(), mc.cols(), ma.rows(), mb.cols()));
  }
  const sim::GemmOptions options{threads_arg(threads)};
  sim::Matrix d;
  {
    py::gil_scoped_release release;
    d = sim::gemm(model, ma, mb, mc, options);
  }
  return to_numpy(d);
}

}  // namespace

void bind_accumulation(py::module_& m) {
  using py::arg;
  m.def("gemm", &gemm_py, arg("A"), arg("B"), arg("C") = py::none(), arg("model") = "tc:h100:fp16:fp32",
        py::kw_only(), arg("threads") = 0, arg("round_inputs") = true,
        R"(D = A B + C under an accumulation model, as float64 values of the model's output format.

model: a spec string as `rpsim gemm --model` and training configs take it (tc:h100:fp16:fp32,
sequential:fp16:rne, blocked:32:bf16, exact, ...) or a dict ({'kind': 'tc', 'preset': 'a100'}).
A and B are rounded to the model's input format and C to its output format (nearest even), as a
cast before the kernel would; round_inputs=False instead raises ValueError for a value that is not
already one. threads: 0 is OpenMP's default; the result does not depend on it.)");
}

}  // namespace rpsim::python
