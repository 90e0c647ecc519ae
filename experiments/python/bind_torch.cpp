// The C++ half of rpsim.torch: batched GEMMs under an accumulation model
// through the training simulator's matmul (its native kernels where the
// model allows, sim::gemm otherwise: the same bits, tested), a stateful loss
// scaler from the scaler table, and the op and policy tables as Python data,
// so that rpsim.torch reads the rows the CLI reads instead of copying them.
#include <fmt/format.h>
#include <omp.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "bind_config.hpp"
#include "bindings.hpp"
#include "rpsim/scaling/loss_scaler.hpp"
#include "rpsim/train/ops.hpp"
#include "rpsim/train/policy.hpp"
#include "rpsim/train/tensor.hpp"

namespace rpsim::python {

namespace {

namespace train = sim::train;

py::object json_to_python(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

// Matrix `index` of a C-contiguous (batch, rows, cols) array, rounded to
// `fmt` (nearest even) as the cast in front of a GEMM kernel; skipped where
// every value already is one (binary64, or binary32 from a float32 array).
sim::Matrix slice(const F64& a, py::ssize_t index, const Format& fmt, bool from_float32) {
  const py::ssize_t r = a.shape(1), c = a.shape(2);
  sim::Matrix m = Eigen::Map<const RowMajor>(a.data() + index * r * c, r, c);
  const bool exact = fmt == formats::binary64() || (from_float32 && fmt == formats::binary32());
  if (!exact) train::round_in_place(fmt, m, RoundingMode::nearest_even);
  return m;
}

bool is_float32(py::handle x) {
  return py::isinstance<py::array_t<float>>(x);
}

// D[i] = A[i] B[i] (+ C[i]) for each i of the batch, as rpsim.gemm computes
// each product: A and B rounded to the model's input format, C to its
// output format. Stochastic models draw from (seed, stream + i) unless both
// are 0, where the model is used as given (rpsim.gemm's draws).
py::array gemm_batched(py::handle a_in, py::handle b_in, const py::object& c_in, const py::object& model_spec,
                       std::uint64_t seed, std::uint64_t stream) {
  const sim::AccumulationModel model = model_arg(model_spec);
  const F64 a = batched_array(a_in, "A"), b = batched_array(b_in, "B");
  const py::ssize_t batch = a.shape(0), m = a.shape(1), k = a.shape(2), n = b.shape(2);
  if (b.shape(0) != batch || b.shape(1) != k)
    throw py::value_error(
        fmt::format("A is {}x{}x{} but B is {}x{}x{}", batch, m, k, b.shape(0), b.shape(1), n));
  F64 c;
  if (!c_in.is_none()) {
    c = batched_array(c_in, "C");
    if (c.shape(0) != batch || c.shape(1) != m || c.shape(2) != n)
      throw py::value_error(
          fmt::format("C is {}x{}x{} but A B is {}x{}x{}", c.shape(0), c.shape(1), c.shape(2), batch, m, n));
  }
  const bool a32 = is_float32(a_in), b32 = is_float32(b_in), c32 = !c_in.is_none() && is_float32(c_in);
  py::array_t<double> out({batch, m, n});
  double* dst = out.mutable_data();
  const Format& in = model.input_format();
  {
    py::gil_scoped_release release;
    for (py::ssize_t i = 0; i < batch; ++i) {
      const sim::Matrix ma = slice(a, i, in, a32), mb = slice(b, i, in, b32);
      sim::Matrix d;
      if (c_in.is_none()) {
        const bool keyed = seed != 0 || stream != 0;
        d = train::matmul(
            ma, mb, model,
            keyed ? train::RandomStream{seed, stream + std::uint64_t(i)} : train::RandomStream{});
      } else {
        d = sim::gemm(model, ma, mb, slice(c, i, model.output_format(), c32),
                      sim::GemmOptions{omp_get_max_threads()});
      }
      Eigen::Map<RowMajor>(dst + i * m * n, m, n) = d;
    }
  }
  return out;
}

const char* autocast_name(train::AutocastClass c) {
  switch (c) {
    case train::AutocastClass::lower_precision: return "lower_precision";
    case train::AutocastClass::fp32: return "fp32";
    default: return "follow_inputs";
  }
}

py::list words(const char* text) {
  py::list out;
  std::string w;
  for (const char* c = text;; ++c) {
    if (*c == ' ' || *c == '\0') {
      if (!w.empty()) out.append(w);
      w.clear();
      if (*c == '\0') break;
    } else {
      w += *c;
    }
  }
  return out;
}

py::list torch_names_py() {
  py::list rows;
  for (const auto& n : train::torch_names()) {
    py::dict d;
    d["name"] = n.name;
    d["class"] = train::torch_class_name(n.cls);
    d["note"] = n.note;
    rows.append(d);
  }
  return rows;
}

py::list ops_py() {
  py::list rows;
  for (const auto& o : train::ops()) {
    py::dict d;
    d["name"] = o.name;
    d["autocast"] = autocast_name(o.autocast);
    d["fp8_gemm"] = o.fp8_gemm;
    d["help"] = o.help;
    d["layer"] = o.layer != nullptr;
    d["loss"] = o.loss != nullptr;
    d["torch_kernel"] = train::torch_kernel_name(o.torch_kernel);
    d["torch_functions"] = words(o.torch_functions);
    d["torch_modules"] = words(o.torch_modules);
    rows.append(d);
  }
  return rows;
}

py::list policies_py() {
  py::list rows;
  for (const auto& p : train::policies()) {
    py::dict d;
    d["name"] = p.name;
    d["description"] = p.description;
    rows.append(d);
  }
  return rows;
}

// A named policy or a config's policy object, resolved by the config parser
// (ConfigError, an invalid_argument, names the key) and written back as
// meta.json's "policy".
py::object policy_py(const py::object& spec) {
  const train::PrecisionPolicy p = policy_arg(spec);
  nlohmann::json j = p.to_json();
  j["default_loss_scaler"] = p.default_loss_scaler;
  return json_to_python(j);
}

// One framework's loss scaler, stepped by the caller (rpsim.torch.GradScaler).
class Scaler {
 public:
  Scaler(const std::string& policy, const py::kwargs& params);
  double scale() const { return scaler_->scale(); }
  bool update(bool found) { return scaler_->update(found); }
  // Whether update(found) would skip the step, the scaler left as it is.
  bool skips(bool found) const { return scaler_->clone()->update(found); }
  std::string state() const { return scaler_->state(); }
  std::string policy() const { return resolved_->policy; }
  // Whether the row scales layer by layer during backward (adaptive), which
  // a torch.cuda.amp.GradScaler loop cannot: it scales only the loss.
  bool per_layer() const { return scaler_->per_layer() != nullptr; }
  py::dict config() const {
    py::dict d;
    for (const auto& f : sim::scaler_fields())
      if (f.is_set(resolved_.get())) d[f.name] = f.get(resolved_.get());
    return d;
  }

 private:
  sim::ResolvedScalerConfig resolved_;
  std::unique_ptr<sim::LossScaler> scaler_;
};

Scaler::Scaler(const std::string& policy, const py::kwargs& params) {
  // The same keyword checks as rpsim.scaler_trajectory (bind_scaling.cpp).
  py::dict kw;
  for (const auto& [k, v] : params) kw[k] = v;
  const py::object probe = py::module_::import("rpsim._core").attr("scaler_trajectory");
  probe(py::list(), policy, **kw);
  sim::ScalerConfig config;
  // The row's own name for an alias ("dynamic" is PyTorch's), as meta.json names it.
  const sim::LossScalerInfo* row = sim::find_loss_scaler(policy);
  config.policy = row ? std::string(row->name) : policy;
  for (const auto& [key, value] : params)
    for (const auto& f : sim::scaler_fields())
      if (key.cast<std::string>() == f.name)
        f.set(config, py::isinstance<py::bool_>(value)
                          ? (value.cast<bool>() ? 1.0 : 0.0)
                          : py::float_(py::reinterpret_borrow<py::object>(value)).cast<double>());
  resolved_ = sim::resolve_scaler_config(config);
  scaler_ = sim::make_loss_scaler(resolved_);
}

}  // namespace

void bind_torch(py::module_& m) {
  using py::arg;
  m.def("_torch_gemm", &gemm_batched, arg("A"), arg("B"), arg("C"), arg("model"), arg("seed") = 0,
        arg("stream") = 0,
        "rpsim.torch's GEMM: D[i] = A[i] B[i] (+ C[i]) over a batch of 3-D float arrays, each product as "
        "rpsim.gemm computes it; float64 values of the model's output format.");
  m.def(
      "_torch_model_formats",
      [](const py::object& model) {
        const sim::AccumulationModel a = model_arg(model);
        const sim::TensorCoreModel* tc = a.bare_instruction();
        return py::make_tuple(a.input_format().name, a.output_format().name, tc ? tc->scale_block : 0);
      },
      arg("model"),
      "(input format, output format, scale block: 0 unless a block-scaled instruction) of an accumulation "
      "model; ValueError naming a bad one.");
  m.def("_torch_ops", &ops_py,
        "The op table (sim/train ops.cpp): name, autocast class, fp8_gemm, help, and rpsim.torch's columns: "
        "torch_kernel (gemm, layer, loss, layout, elementwise), torch_functions, torch_modules.");
  m.def(
      "_torch_names", &torch_names_py,
      "PyTorch's names outside the op table (sim/train torch_names.cpp): name, class (lower_precision, fp32, "
      "layout, refused, refused_module, decomposed, lower_precision_decomposed, fp32_decomposed, aten_gemm), "
      "note.");
  m.def("_torch_policies", &policies_py, "The named precision policies (sim/train policy.cpp).");
  m.def("_torch_policy", &policy_py, arg("policy"),
        "A policy name or policy object resolved as `rpsim train` resolves it, as meta.json writes it.");
  m.def(
      "_torch_loss_scalers",
      [] {
        py::list names;
        for (const auto& n : sim::loss_scaler_policies()) names.append(n);
        return names;
      },
      "The loss-scaler table's policy names (sim/scaling loss_scaler.cpp), in the order the CLI lists them.");
  py::class_<Scaler>(m, "_LossScaler")
      .def(py::init<const std::string&, const py::kwargs&>(), arg("policy"))
      .def("scale", &Scaler::scale)
      .def("update", &Scaler::update, arg("found_nonfinite"))
      .def("skips", &Scaler::skips, arg("found_nonfinite"))
      .def("state", &Scaler::state)
      .def_property_readonly("policy", &Scaler::policy)
      .def_property_readonly("per_layer", &Scaler::per_layer)
      .def("config", &Scaler::config);
}

}  // namespace rpsim::python
