// rpsim.scaler_trajectory: a sequence of overflow events replayed through one
// framework's loss scaler (sim/scaling loss_scaler_trace.hpp), as `rpsim
// scaler` does; the parameters are the loss-scaler field table's names.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "bindings.hpp"
#include "rpsim/scaling/fp8_scaling.hpp"
#include "rpsim/scaling/loss_scaler.hpp"
#include "rpsim/scaling/loss_scaler_trace.hpp"

namespace rpsim::python {

namespace {

std::string field_list() {
  std::string names;
  for (const auto& f : sim::scaler_fields()) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names;
}

const sim::ScalerFieldInfo& field_arg(const std::string& key) {
  for (const auto& f : sim::scaler_fields())
    if (key == f.name) return f;
  throw py::value_error(
      fmt::format("scaler parameter '{}' is unknown; the parameters are {}", key, field_list()));
}

// One keyword argument through the field table's setter, after checking its
// kind: a flag takes a bool, an integer an integral number, a real any number.
void set_field(sim::ScalerConfig& config, const std::string& key, py::handle value) {
  const sim::ScalerFieldInfo& f = field_arg(key);
  const bool is_bool = py::isinstance<py::bool_>(value);
  const std::string repr = py::repr(value).cast<std::string>();
  if (f.kind == sim::ScalerFieldKind::flag) {
    if (!is_bool) throw py::type_error(fmt::format("{} = {}: must be True or False", key, repr));
    f.set(config, value.cast<bool>() ? 1 : 0);
    return;
  }
  if (is_bool || !(py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value) ||
                   py::hasattr(value, "__float__")))
    throw py::type_error(fmt::format("{} = {}: must be a number", key, repr));
  const double v = py::float_(py::reinterpret_borrow<py::object>(value)).cast<double>();
  if (f.kind == sim::ScalerFieldKind::integer && !(std::isfinite(v) && v == std::floor(v)))
    throw py::value_error(fmt::format("{} = {}: must be an integer", key, repr));
  f.set(config, v);
}

// Events as 0/1 (bool or integer array, or a list of them); another dtype is
// a TypeError, another value a ValueError naming its position.
std::vector<bool> events_arg(py::handle events) {
  const py::array a = py::array::ensure(events);
  if (!a) throw py::type_error("events: must be a sequence of 0/1 or bools");
  const char kind = a.dtype().kind();
  if (a.size() == 0 && a.ndim() == 1) return {};  // [] reads as float64
  if (kind != 'b' && kind != 'i' && kind != 'u')
    throw py::type_error(fmt::format("events: dtype {} is not bool or integer (one 0/1 per step)",
                                     py::str(a.dtype()).cast<std::string>()));
  if (a.ndim() != 1)
    throw py::value_error(fmt::format("events: must be one-dimensional, not {}-d", a.ndim()));
  const auto values = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  std::vector<bool> out(std::size_t(values.size()));
  for (py::ssize_t i = 0; i < values.size(); ++i) {
    const std::int64_t e = values.data()[i];
    if (e != 0 && e != 1)
      throw py::value_error(fmt::format("events[{}] = {}: must be 0 (finite) or 1 (inf/NaN found)", i, e));
    out[std::size_t(i)] = e == 1;
  }
  return out;
}

py::dict scaler_trajectory_py(py::handle events, const std::string& policy, const py::kwargs& params) {
  sim::ScalerConfig config;
  config.policy = policy;
  for (const auto& [key, value] : params) set_field(config, key.cast<std::string>(), value);
  // std::invalid_argument naming the policy or field -> ValueError.
  const sim::ResolvedScalerConfig resolved = sim::resolve_scaler_config(config);
  const std::vector<bool> overflow = events_arg(events);
  auto scaler = sim::make_loss_scaler(resolved);
  sim::ScalerTrace trace;
  {
    py::gil_scoped_release release;
    trace = sim::run_loss_scaler(*scaler, overflow);
  }
  const auto n = py::ssize_t(trace.steps.size());
  py::array_t<std::int64_t> step(n);
  py::array_t<double> scale(n);
  py::array_t<bool> skipped(n);
  for (py::ssize_t i = 0; i < n; ++i) {
    const sim::ScalerStep& s = trace.steps[std::size_t(i)];
    step.mutable_data()[i] = s.step;
    scale.mutable_data()[i] = s.scale;
    skipped.mutable_data()[i] = s.skipped;
  }
  py::dict d;
  d["step"] = step;
  d["scale"] = scale;
  d["skipped"] = skipped;
  d["stopped"] = trace.stopped ? py::object(py::str(*trace.stopped)) : py::object(py::none());
  d["policy"] = resolved->policy;
  return d;
}

}  // namespace

void bind_scaling(py::module_& m) {
  using py::arg;
  m.def("scaler_trajectory", &scaler_trajectory_py, arg("events"), arg("policy") = "deepspeed",
        R"(Replay overflow events through a framework's loss scaler, as `rpsim scaler` does.

events: one 0/1 (or bool) per optimizer step, 1 where that step's backward pass found an inf/NaN
gradient. policy: none static pytorch deepspeed megatron apex keras tf2. Parameters by the names
configs use: init_scale, growth_factor, backoff_factor, growth_interval, hysteresis,
consecutive_hysteresis, min_scale, max_scale, raise_at_min_scale; unset ones take the policy's
upstream default, and one the policy does not read raises ValueError naming it.
Returns {'step': int64 (1-based), 'scale': float64 (the loss scale each step's backward pass used),
'skipped': bool, 'stopped': None or the message where the scaler stopped the run (DeepSpeed with
raise_at_min_scale; the arrays then hold the steps before it), 'policy'}.)");

  // Transformer Engine's FP8 scaling rules (sim/scaling fp8_scaling.hpp), the one
  // implementation rpsim train's FP8 layers use, for rpsim.torch's FP8 GEMMs.
  py::class_<sim::DelayedScaling>(m, "_DelayedScaling")
      .def(
          py::init([](float fp8_max, int margin, std::size_t history_len, const std::string& algo) {
            const auto a = sim::parse_amax_compute_algo(algo);
            if (!a)
              throw py::value_error(fmt::format("amax_compute_algo '{}': expected max or most_recent", algo));
            return sim::DelayedScaling(sim::DelayedScalingConfig{fp8_max, margin, history_len, *a});
          }),
          arg("fp8_max"), arg("margin"), arg("amax_history_len"), arg("amax_compute_algo"))
      .def("scale", &sim::DelayedScaling::scale)
      .def("record_amax", &sim::DelayedScaling::record_amax, arg("amax"))
      .def("update", &sim::DelayedScaling::update);
  m.def(
      "_current_scale",
      [](float amax, float fp8_max) { return sim::current_scale_from_amax(amax, {fp8_max}); }, arg("amax"),
      arg("fp8_max"));
}

}  // namespace rpsim::python
