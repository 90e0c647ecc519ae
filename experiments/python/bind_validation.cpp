// rpsim.gemm_check: a GEMM computed on a GPU (A, B, D and optionally C, as
// arrays or a dump file) checked bit for bit against an accumulation model or
// kernel schedule, by the library behind `rpsim gemm-check`
// (sim/validation gemm_check.hpp).
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <filesystem>

#include "bindings.hpp"
#include "rpsim/io/npy.hpp"
#include "rpsim/io/process.hpp"
#include "rpsim/validation/gemm_check.hpp"
#include "rpsim/validation/gemm_infer.hpp"

namespace rpsim::python {

namespace {

// The dtype a dump file records for D, from the array the user passed.
std::string dtype_of(py::handle x) {
  const py::array a = py::array::ensure(x);
  return a ? py::str(a.dtype()).cast<std::string>() : "float64";
}

sim::GemmDump dump_from_arrays(py::handle a, py::handle b, py::handle d, const py::object& c) {
  sim::GemmDump dump;
  dump.source = "arrays";
  dump.sources = {{'A', "A"}, {'B', "B"}, {'D', "D"}, {'C', "C"}};
  dump.a = matrix_arg(a, "A");
  dump.b = matrix_arg(b, "B");
  dump.d = matrix_arg(d, "D");
  dump.d_dtype = dtype_of(d);
  if (!c.is_none()) dump.c = matrix_arg(c, "C");
  // The shape checks load_gemm_dump makes for a file.
  if (dump.a.cols() != dump.b.rows())
    throw py::value_error(
        fmt::format("A is {}x{} but B is {}x{}", dump.a.rows(), dump.a.cols(), dump.b.rows(), dump.b.cols()));
  if (dump.d.rows() != dump.a.rows() || dump.d.cols() != dump.b.cols())
    throw py::value_error(fmt::format("D is {}x{} but A B is {}x{}", dump.d.rows(), dump.d.cols(),
                                      dump.a.rows(), dump.b.cols()));
  if (dump.c && (dump.c->rows() != dump.d.rows() || dump.c->cols() != dump.d.cols()))
    throw py::value_error(fmt::format("C is {}x{} but D is {}x{}", dump.c->rows(), dump.c->cols(),
                                      dump.d.rows(), dump.d.cols()));
  return dump;
}

sim::GemmDump dump_from_file(const py::object& path) {
  std::vector<std::filesystem::path> files;
  if (py::isinstance<py::list>(path) || py::isinstance<py::tuple>(path))
    for (const py::handle p : path) files.emplace_back(py::str(p).cast<std::string>());
  else
    files.emplace_back(py::str(path).cast<std::string>());
  try {
    return sim::load_gemm_dump(files, sim::DumpFormat::numpy);
  } catch (const io::ArrayFileError& e) {
    throw py::value_error(e.what());
  }
}

bool is_path(py::handle x) {
  return py::isinstance<py::str>(x) || py::hasattr(x, "__fspath__") || py::isinstance<py::list>(x) ||
         py::isinstance<py::tuple>(x);
}

py::dict gemm_check_py(const py::object& a, const py::object& b, const py::object& d,
                       const py::object& model_spec, const py::object& c, std::size_t show, int threads,
                       const py::object& sfa, const py::object& sfb, const py::object& scale_a,
                       const py::object& scale_b) {
  if (model_spec.is_none()) throw py::value_error("model: required (a spec such as 'cublas:h100:fp16:fp32')");
  const sim::AccumulationModel model = model_arg(model_spec);
  io::check_threads(threads, "threads =", false);  // std::invalid_argument -> ValueError
  const bool file = is_path(a) && b.is_none() && d.is_none();
  if (!file && (b.is_none() || d.is_none()))
    throw py::value_error("gemm_check(A, B, D, model=...) or gemm_check(dump_file, model=...)");
  sim::GemmDump dump = file ? dump_from_file(a) : dump_from_arrays(a, b, d, c);
  // Scales given here stand for the dump's own (SFA, SFB, scale_a, scale_b arrays).
  const sim::GemmScales given = scales_arg(sfa, sfb, scale_a, scale_b);
  if (given.sfa) dump.scales.sfa = given.sfa;
  if (given.sfb) dump.scales.sfb = given.sfb;
  if (given.scale_a) dump.scales.scale_a = given.scale_a;
  if (given.scale_b) dump.scales.scale_b = given.scale_b;
  sim::check_dump_formats(dump, model);  // GemmDumpError (invalid_argument) -> ValueError
  sim::GemmCheckResult r;
  {
    py::gil_scoped_release release;
    r = sim::check_gemm(dump, model, show, threads);
  }
  py::list mismatches;
  for (const auto& m : r.first) {
    py::dict e;
    e["row"] = m.row;
    e["col"] = m.col;
    e["dump"] = m.expected;  // the dump's D (the CLI's "dump")
    e["model"] = m.got;      // the model's
    e["ulps"] = m.ulps;      // model - dump, in ulps of the output format
    mismatches.append(e);
  }
  py::dict out;
  out["model"] = r.model;
  out["schedule"] = r.schedule;
  out["output_format"] = std::string(model.output_format().name);
  out["source"] = dump.source;
  out["total"] = r.total;
  out["passed"] = r.passed;
  out["failed"] = r.total - r.passed;
  out["max_ulps"] = r.max_ulps;
  out["mean_ulps"] = r.mean_ulps;
  out["mismatches"] = mismatches;
  out["model_D"] = to_numpy(r.got);
  return out;
}

py::list ranked_list(const std::vector<sim::InferredSchedule>& list) {
  py::list out;
  for (const auto& s : list) {
    py::dict e;
    e["model"] = s.spec;
    e["note"] = s.note;
    e["passed"] = s.passed;
    e["total"] = s.total;
    e["max_ulps"] = s.max_ulps;
    e["mean_ulps"] = s.mean_ulps;
    e["equivalents"] = s.equivalents;
    e["family"] = s.family;
    out.append(e);
  }
  return out;
}

// The search of `rpsim gemm-check --infer` (gemm_infer.hpp).
py::dict gemm_infer_py(const py::object& a, const py::object& b, const py::object& d, const py::object& c,
                       std::size_t top, int threads) {
  io::check_threads(threads, "threads =", false);  // std::invalid_argument -> ValueError
  const bool file = is_path(a) && b.is_none() && d.is_none();
  if (!file && (b.is_none() || d.is_none()))
    throw py::value_error("gemm_check(A, B, D, infer=True) or gemm_check(dump_file, infer=True)");
  const sim::GemmDump dump = file ? dump_from_file(a) : dump_from_arrays(a, b, d, c);
  sim::InferOptions options;
  options.top = top;
  options.threads = threads;
  sim::InferResult r;
  {
    py::gil_scoped_release release;
    r = sim::infer_schedule(dump, options);  // GemmDumpError (invalid_argument) -> ValueError
  }
  py::dict out;
  out["source"] = dump.source;
  out["stored_format"] = std::string(r.stored.name);
  out["output_format"] = std::string(r.output.name);
  out["candidates"] = r.candidates;
  out["exact"] = ranked_list(r.exact);
  out["best"] = ranked_list(r.best);
  out["presets"] = r.presets;
  out["truncated"] = r.truncated;
  return out;
}

}  // namespace

void bind_validation(py::module_& m) {
  using py::arg;
  m.def("_gemm_check", &gemm_check_py, arg("A"), arg("B"), arg("D"), arg("model"), arg("C"), arg("show"),
        arg("threads"), arg("sfa") = py::none(), arg("sfb") = py::none(), arg("scale_a") = py::none(),
        arg("scale_b") = py::none(), "The C++ half of rpsim.gemm_check (rpsim/_gemm.py).");
  m.def("_gemm_infer", &gemm_infer_py, arg("A"), arg("B"), arg("D"), arg("C"), arg("top"), arg("threads"),
        "The C++ half of rpsim.gemm_check(..., infer=True) (rpsim/_gemm.py).");
}

}  // namespace rpsim::python
