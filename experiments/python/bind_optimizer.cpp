// rpsim train's optimizer from Python (sim/train optimizer.hpp): the update
// arithmetic of rpsim.torch.SGD and rpsim.torch.AdamW, on NumPy views of the
// parameters and their gradients, in place. The optimizer's state (momentum,
// Adam's moments, Kahan compensation) lives in the C++ object, per parameter
// in the order the parameters are given.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "rpsim/train/optimizer.hpp"

namespace rpsim::python {

namespace {

namespace train = sim::train;

class PyOptimizer {
 public:
  PyOptimizer(train::OptimizerConfig config, const std::string& compute, const py::object& state,
              const py::object& storage, bool kahan) {
    policy_ = std::make_unique<train::PrecisionPolicy>();
    policy_->name = "rpsim.torch";
    policy_->optimizer_compute = &format_arg(compute);
    policy_->optimizer_state = state.is_none() ? policy_->optimizer_compute : &format_arg(state);
    policy_->weights = storage.is_none() ? policy_->optimizer_compute : &format_arg(storage);
    policy_->gradients = policy_->optimizer_compute;
    policy_->kahan = kahan;
    optimizer_ = std::make_unique<train::Optimizer>(std::move(config), *policy_, 0);
  }

  PyOptimizer(const PyOptimizer& o)
      : policy_(std::make_unique<train::PrecisionPolicy>(*o.policy_)),
        optimizer_(std::make_unique<train::Optimizer>(*o.optimizer_)),
        params_(o.params_) {
    optimizer_->set_policy(*policy_);
  }
  PyOptimizer(PyOptimizer&&) = default;

  // One update of every parameter whose gradient is not None (the others
  // keep their state untouched); values, grads: float32/float64 arrays of
  // the same shape each, values written in place.
  void step(const py::list& values, const py::list& grads, const std::vector<bool>& decay, double lr) {
    if (grads.size() != values.size() || decay.size() != values.size())
      throw py::value_error("one gradient and one decay flag per parameter are needed");
    if (params_.size() != values.size()) params_.assign(values.size(), train::Parameter{});
    std::vector<train::Parameter*> live;
    std::vector<py::array> arrays;
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (grads[i].is_none()) continue;
      py::array v = py::array::ensure(values[i], py::array::c_style);
      if (!v || !v.writeable()) throw py::value_error("parameters: a writeable C-contiguous array is needed");
      train::Parameter& p = params_[i];
      p.value = to_column(v);
      p.grad = to_column(py::array::ensure(grads[i], py::array::c_style));
      if (p.grad.size() != p.value.size())
        throw py::value_error("a gradient's size differs from its parameter's");
      p.decay = decay[i];
      live.push_back(&p);
      arrays.push_back(v);
    }
    optimizer_->set_lr(lr);
    {
      py::gil_scoped_release release;
      step_live(live);
    }
    for (std::size_t i = 0; i < live.size(); ++i) from_column(live[i]->value, arrays[i]);
  }

 private:
  // The optimizer keys its state by position: each live parameter's own.
  void step_live(const std::vector<train::Parameter*>& live) {
    if (live.size() == params_.size()) return optimizer_->step(live);
    // Some gradients missing: step the full list with the missing ones
    // holding an empty gradient, which the optimizer skips.
    std::vector<train::Parameter*> all;
    for (auto& p : params_) all.push_back(&p);
    for (auto& p : params_)
      if (std::find(live.begin(), live.end(), &p) == live.end()) p.grad = sim::Matrix();
    optimizer_->step(all);
  }

  static sim::Matrix to_column(const py::array& a) {
    sim::Matrix m(a.size(), 1);
    if (py::isinstance<py::array_t<float>>(a)) {
      const float* p = static_cast<const float*>(a.data());
      for (py::ssize_t i = 0; i < a.size(); ++i) m(i, 0) = p[i];
    } else if (py::isinstance<py::array_t<double>>(a)) {
      const double* p = static_cast<const double*>(a.data());
      for (py::ssize_t i = 0; i < a.size(); ++i) m(i, 0) = p[i];
    } else {
      throw py::type_error("parameters and gradients: float32 or float64 arrays are needed");
    }
    return m;
  }

  static void from_column(const sim::Matrix& m, py::array& a) {
    if (py::isinstance<py::array_t<float>>(a)) {
      float* p = static_cast<float*>(a.mutable_data());
      for (py::ssize_t i = 0; i < a.size(); ++i) p[i] = float(m(i, 0));
    } else {
      double* p = static_cast<double*>(a.mutable_data());
      for (py::ssize_t i = 0; i < a.size(); ++i) p[i] = m(i, 0);
    }
  }

  std::unique_ptr<train::PrecisionPolicy> policy_;
  std::unique_ptr<train::Optimizer> optimizer_;
  std::vector<train::Parameter> params_;
};

}  // namespace

void bind_optimizer(py::module_& m) {
  using py::arg;
  py::class_<PyOptimizer>(m, "_Optimizer")
      .def(py::init([](const std::string& type, double lr, double momentum, double weight_decay,
                       std::pair<double, double> betas, double eps, const std::string& compute,
                       const py::object& state, const py::object& storage, bool kahan) {
             train::OptimizerConfig c;
             c.type = type;
             c.lr = lr;
             c.momentum = momentum;
             c.weight_decay = weight_decay;
             c.betas = {betas.first, betas.second};
             c.eps = eps;
             return PyOptimizer(c, compute, state, storage, kahan);
           }),
           arg("type"), arg("lr"), arg("momentum") = 0.0, arg("weight_decay") = 0.0,
           arg("betas") = std::pair<double, double>{0.9, 0.999}, arg("eps") = 1e-8,
           arg("compute") = "binary32", arg("state") = py::none(), arg("storage") = py::none(),
           arg("kahan") = false,
           "rpsim train's optimizer (type sgd, adam, adamw) in the arithmetic format `compute`, its state "
           "stored in `state`, with Kahan-compensated updates stored in `storage` when kahan.")
      .def(
          "__deepcopy__", [](const PyOptimizer& o, const py::dict&) { return PyOptimizer(o); }, arg("memo"))
      .def("step", &PyOptimizer::step, arg("values"), arg("grads"), arg("decay"), arg("lr"),
           "One update of the parameters (in place) from their gradients (None: skipped).");
}

}  // namespace rpsim::python
