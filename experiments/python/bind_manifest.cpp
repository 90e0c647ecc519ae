// rpsim.gemm_check(DIR): every GEMM a rpsim.torch.capture_gemms directory
// holds, checked under its model by the library behind `rpsim gemm-check DIR`
// (sim/validation gemm_manifest.hpp).
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "rpsim/validation/gemm_manifest.hpp"

namespace rpsim::python {

void bind_manifest(py::module_& m) {
  m.def(
      "_gemm_check_manifest",
      [](const std::string& path, const std::vector<std::string>& models, std::size_t show, int threads) {
        if (threads < 1) throw py::value_error("threads must be at least 1");
        sim::ManifestReport r;
        {
          py::gil_scoped_release release;
          r = sim::check_gemm_manifest(sim::load_gemm_manifest(path), models, show, threads);
        }
        py::list rows;
        for (const auto& row : r.rows) {
          py::dict d;
          d["call"] = row.call;
          d["op"] = row.op;
          d["shape"] = row.shape;
          d["dtype"] = row.dtype;
          d["model"] = row.model;
          d["note"] = row.note;
          d["schedule"] = row.schedule;
          d["gemms"] = row.gemms;
          d["passed"] = row.passed;
          d["total"] = row.total;
          d["max_ulps"] = row.max_ulps;
          rows.append(d);
        }
        py::dict out;
        out["rows"] = rows;
        out["mismatches"] = r.mismatches;
        out["passed"] = r.passed;
        out["failed"] = r.failed;
        out["skipped"] = r.skipped;
        out["skip_reasons"] = r.skip_reasons;
        out["table"] = r.table();
        return out;
      },
      py::arg("path"), py::arg("models"), py::arg("show") = 10, py::arg("threads") = 1,
      "The C++ half of rpsim.gemm_check on a capture_gemms directory or manifest.json.");
}

}  // namespace rpsim::python
