// rpsim.mx_quantize and rpsim.nvfp4_quantize: OCP MX and NVFP4 block
// quantisation of a NumPy array (formats/block_scale.hpp), blocks taken along
// its last axis, row by row (NVFP4's tensor scale from the whole array).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bindings.hpp"
#include "rpsim/formats/block_scale.hpp"

namespace rpsim::python {

namespace {

struct Rows {
  py::array_t<double, py::array::c_style | py::array::forcecast> a;
  std::size_t rows = 1, cols = 0;
};

Rows rows_of(py::handle x, std::size_t block) {
  if (block == 0) throw py::value_error("block: must be at least 1");
  Rows r;
  const py::array given = float_array(x, "x");
  r.a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(given);
  require_copy(r.a, given, "x");
  if (r.a.ndim() == 0) throw py::value_error("x: must have at least one axis");
  r.cols = static_cast<std::size_t>(r.a.shape(r.a.ndim() - 1));
  r.rows = r.cols == 0 ? 0 : static_cast<std::size_t>(r.a.size()) / r.cols;
  return r;
}

// {"elements": like x, "scales": (..., blocks) float64, "scale_codes": uint8,
// "tensor_scale": float, "block": int}.
py::dict result(const Rows& r, const std::vector<BlockQuantized>& q, std::size_t block) {
  const std::size_t blocks = (r.cols + block - 1) / block;
  std::vector<py::ssize_t> shape(r.a.shape(), r.a.shape() + r.a.ndim());
  py::array_t<double> elements(shape);
  shape.back() = static_cast<py::ssize_t>(blocks);
  py::array_t<double> scales(shape);
  py::array_t<std::uint8_t> codes(shape);
  for (std::size_t i = 0; i < q.size(); ++i) {
    std::copy(q[i].elements.begin(), q[i].elements.end(), elements.mutable_data() + i * r.cols);
    std::copy(q[i].scales.begin(), q[i].scales.end(), scales.mutable_data() + i * blocks);
    std::copy(q[i].scale_codes.begin(), q[i].scale_codes.end(), codes.mutable_data() + i * blocks);
  }
  py::dict d;
  d["elements"] = elements;
  d["scales"] = scales;
  d["scale_codes"] = codes;
  d["tensor_scale"] = q.empty() ? 1.0 : q.front().tensor_scale;
  d["block"] = block;
  return d;
}

py::dict mx_py(py::handle x, const std::string& element, std::size_t block) {
  const Format f = parse_format(element);  // FormatError -> ValueError
  const Rows r = rows_of(x, block);
  std::vector<BlockQuantized> q;
  for (std::size_t i = 0; i < r.rows; ++i)
    q.push_back(mx_quantize(f, std::span<const double>(r.a.data() + i * r.cols, r.cols), block));
  return result(r, q, block);
}

py::dict nvfp4_py(py::handle x, std::size_t block) {
  const Rows r = rows_of(x, block);
  // The whole array's amax, NaN if any entry is (TE's torch.max): a NaN
  // makes every block's scale NaN.
  double amax = 0;
  for (py::ssize_t i = 0; i < r.a.size(); ++i)
    amax = std::isnan(amax) || std::isnan(r.a.data()[i]) ? NAN : std::max(amax, std::fabs(r.a.data()[i]));
  std::vector<BlockQuantized> q;
  for (std::size_t i = 0; i < r.rows; ++i)
    q.push_back(nvfp4_quantize(std::span<const double>(r.a.data() + i * r.cols, r.cols), block, amax));
  return result(r, q, block);
}

}  // namespace

void bind_blockscale(py::module_& m) {
  m.def("mx_quantize", &mx_py, py::arg("x"), py::arg("element") = "e4m3", py::arg("block") = 32,
        "OCP MX v1.0 block quantisation along the last axis: E8M0 scale 2^(floor(log2 amax) - emax), "
        "elements rounded to nearest even with saturation. Returns a dict: elements (values of the element "
        "format), scales, scale_codes (E8M0), tensor_scale (1), block; x ~ elements * scales (per block).");
  m.def(
      "nvfp4_quantize", &nvfp4_py, py::arg("x"), py::arg("block") = 16,
      "NVFP4 quantisation along the last axis as Transformer Engine's reference computes it (the te-nvfp4 "
      "recipe, formula te-2026-03; rpsim.quantize has its other options): e2m1 elements in blocks of 16, an "
      "E4M3 scale per block under the per-tensor FP32 encode scale ges = min(2688/amax, FLT_MAX). Returns a "
      "dict: elements, scales (E4M3 values), scale_codes, tensor_scale (1/ges), block; x ~ elements * "
      "scales * tensor_scale.");
}

}  // namespace rpsim::python
