// rpsim.quantize, rpsim.recipes, rpsim.recipe_check and rpsim.e8m0_cast:
// the quantisation recipes of formats/recipe.hpp (rows named after the code
// they reproduce: te-nvfp4, torchao-mx, ocp-mx, te-fp8-block,
// te-fp8-current) and their check against reference vector files.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "bind_config.hpp"
#include "bindings.hpp"
#include "rpsim/formats/recipe.hpp"
#include "rpsim/formats/recipe_check.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::python {

namespace {

// A keyword's value as the option text the recipe rows read.
std::string option_text(const std::string& name, py::handle v) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::int_>(v)) return std::to_string(v.cast<long long>());
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  throw py::type_error(fmt::format("option {}: expected a str, int or bool, got {}", name,
                                   std::string(py::str(py::type::of(v).attr("__name__")))));
}

template <class T>
py::array_t<T> grid(const std::vector<T>& v, std::size_t rows, std::size_t cols) {
  py::array_t<T> a({py::ssize_t(rows), py::ssize_t(cols)});
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

// The what-if counts of a recipe on a tensor, and their fractions of the
// non-zero finite entries.
py::dict effect_dict(const RecipeEffect& e) {
  const double n = e.nonzero ? double(e.nonzero) : 1.0;
  return py::dict(py::arg("entries") = e.entries, py::arg("nonzero") = e.nonzero,
                  py::arg("nonfinite") = e.nonfinite, py::arg("underflow") = e.underflow / n,
                  py::arg("saturated") = e.saturated / n, py::arg("subnormal") = e.subnormal / n);
}

// recipe_effect of a block-scaled policy's gradient quantiser on x
// (flattened, 1-D blocks): the what-if counts Telemetry reports per tensor.
py::dict policy_effect_py(py::handle x, const py::object& policy) {
  const sim::train::PrecisionPolicy p = policy_arg(policy);
  QuantSpec spec;
  try {
    spec = sim::train::gradient_spec(p);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
  const py::array given = float_array(x, "x");
  const auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(given);
  require_copy(a, given, "x");
  const std::span<const float> v(a.data(), std::size_t(a.size()));
  RecipeEffect e;
  {
    py::gil_scoped_release release;
    e = recipe_effect(quantize(spec, v, 1, v.size()), v);
  }
  return effect_dict(e);
}

py::dict quantize_py(py::handle x, const std::string& recipe, const py::kwargs& kwargs) {
  RecipeOptions options;
  for (const auto& [k, v] : kwargs) options[k.cast<std::string>()] = option_text(k.cast<std::string>(), v);
  QuantSpec spec;
  try {
    spec = recipe_spec(recipe, options);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
  const py::array given = float_array(x, "x");
  // Read as binary32, as the references read float32 tensors (a float64
  // value rounds to nearest even).
  const auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(given);
  require_copy(a, given, "x");
  if (a.ndim() == 0) throw py::value_error("x: must have at least one axis");
  const auto cols = std::size_t(a.shape(a.ndim() - 1));
  const std::size_t rows = cols == 0 ? 0 : std::size_t(a.size()) / cols;
  Quantized q;
  try {
    py::gil_scoped_release release;
    q = quantize(spec, std::span<const float>(a.data(), std::size_t(a.size())), rows, cols);
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
  py::dict d;
  d["recipe"] = recipe;
  d["codes"] = grid(q.codes, q.rows, q.cols);
  d["scales"] = grid(q.scales, q.scale_rows, q.scale_cols);
  d["scale_codes"] =
      q.scale_codes.empty() ? py::object(py::none()) : grid(q.scale_codes, q.scale_rows, q.scale_cols);
  d["amax"] =
      q.amax.empty() ? py::object(py::none()) : py::object(py::array_t<float>(q.amax.size(), q.amax.data()));
  d["values"] = grid(dequantize(q), q.rows, q.cols);
  if (!spec.columnwise)
    d["effect"] = effect_dict(recipe_effect(q, std::span<const float>(a.data(), std::size_t(a.size()))));
  d["tile"] = py::make_tuple(spec.tile_rows ? spec.tile_rows : int(q.rows),
                             spec.tile_cols ? spec.tile_cols : int(q.cols));
  return d;
}

py::list recipes_py() {
  py::list rows;
  for (const auto& r : recipes()) {
    py::list options;
    for (const auto& o : r.options)
      options.append(
          py::dict(py::arg("name") = std::string(o.name), py::arg("values") = std::string(o.values),
                   py::arg("default") = std::string(o.default_value), py::arg("help") = std::string(o.help)));
    rows.append(py::dict(py::arg("name") = std::string(r.name),
                         py::arg("reference") = std::string(r.reference),
                         py::arg("description") = std::string(r.description), py::arg("options") = options));
  }
  return rows;
}

py::dict recipe_check_py(const std::string& path, std::size_t show) {
  py::list files;
  std::size_t passed = 0, failed = 0;
  try {
    for (const auto& f : recipe_files(path)) {
      RecipeFileCheck r;
      {
        py::gil_scoped_release release;
        r = check_recipe_file(f, show);
      }
      py::dict options;
      for (const auto& [k, v] : r.options) options[py::str(k)] = v;
      files.append(py::dict(py::arg("file") = r.file.string(), py::arg("recipe") = r.recipe,
                            py::arg("options") = options, py::arg("passed") = r.passed,
                            py::arg("failed") = r.failed, py::arg("failures") = r.first_failures));
      passed += r.passed;
      failed += r.failed;
    }
  } catch (const std::invalid_argument& e) {
    throw py::value_error(e.what());
  }
  return py::dict(py::arg("files") = files, py::arg("passed") = passed, py::arg("failed") = failed);
}

py::array e8m0_cast_py(py::handle x, const std::string& rule) {
  recipe::E8m0Cast cast;
  if (rule == "floor")
    cast = recipe::E8m0Cast::floor;
  else if (rule == "ceil")
    cast = recipe::E8m0Cast::ceil;
  else if (rule == "rceil")
    cast = recipe::E8m0Cast::rceil;
  else
    throw py::value_error(fmt::format("rule: '{}' is not an E8M0 cast (floor ceil rceil)", rule));
  const py::array given = float_array(x, "x");
  const auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(given);
  require_copy(a, given, "x");
  py::array_t<std::uint8_t> out(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  for (py::ssize_t i = 0; i < a.size(); ++i) out.mutable_data()[i] = recipe::e8m0_from_f32(a.data()[i], cast);
  return out;
}

}  // namespace

void bind_recipes(py::module_& m) {
  m.def("quantize", &quantize_py, py::arg("x"), py::arg("recipe"),
        "Quantises x (its last axis along rows, read as float32) under a recipe row (rpsim.recipes()), its "
        "options as keywords: rpsim.quantize(x, 'te-nvfp4', formula='te-2026-02', tile='16x16'). Returns a "
        "dict: codes (uint8, the quantised tensor: x^T when direction='columnwise'), scales (float32 decode "
        "multiplier per tile), scale_codes (E8M0 / E4M3, None for FP8), amax (NVFP4's per-tensor or per-row "
        "amax, else None), values (the dequantised tensor, float64), tile, recipe.");
  m.def(
      "recipe_effect", &policy_effect_py, py::arg("x"), py::arg("policy"),
      "What a block-scaled policy's gradient quantiser (its backward element format, 1-D blocks of its block "
      "size along the flattened x) would do to x at this step: {entries, nonzero, nonfinite, underflow, "
      "saturated, subnormal}, the last three as fractions of the non-zero finite entries.");
  m.def("recipes", &recipes_py,
        "The quantisation recipe rows: name, reference (repository, commit, file, entry point), description "
        "and options (name, values, default, help).");
  m.def("recipe_check", &recipe_check_py, py::arg("path"), py::arg("show") = 3,
        "Checks the recipe rows against reference vector files (a file or a folder of *.txt in "
        "../shared/recipes's layout), as `rpsim recipe-check`: {'files': [{file, recipe, options, passed, "
        "failed, failures}], 'passed', 'failed'}.");
  m.def(
      "e8m0_cast", &e8m0_cast_py, py::arg("x"), py::arg("rule") = "floor",
      "E8M0 codes (uint8) of float32 values: floor (the exponent field, OCP MX), ceil (torchao CEIL), rceil "
      "(cvt.rp as torchao's _f32_to_e8m0_rceil); 0xff for NaN and infinity.");
}

}  // namespace rpsim::python
