// The C++ half of rpsim.torch's comparison with `rpsim train`: a config's
// initial parameters and batches (the same calls as the trainer: load_data,
// build_model, epoch_order), and the op table's losses as kernels a PyTorch
// autograd function calls, so a torch model can start from the same state
// and use the same loss arithmetic as the CLI.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "bind_config.hpp"
#include "bindings.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/train/layers/attention.hpp"
#include "rpsim/train/layers/fp8.hpp"
#include "rpsim/train/model.hpp"
#include "rpsim/train/trainer.hpp"

namespace rpsim::python {

py::dict fp8_stats_dict(const sim::train::Fp8Stats& s) {
  py::dict d;
  d["amax"] = s.amax;
  d["scale_min"] = s.scale_min;
  d["scale_max"] = s.scale_max;
  d["entries"] = s.entries;
  d["saturated"] = s.saturated;
  d["flushed"] = s.flushed;
  return d;
}

namespace {

namespace train = sim::train;

// The run's initial parameters ({name: array}, a Linear's weight as rpsim
// stores it: in x out) and the (inputs, labels) of its first `steps` steps,
// drawn as Training::train draws them.
py::dict setup_py(const py::object& config, const std::vector<std::string>& overrides, std::int64_t steps) {
  const train::Config c = config_arg(config, overrides).parse();
  const train::DataSplit data = train::load_data(c.data);
  train::Model model = train::build_model(c, data.train);
  py::dict params;
  py::list layers;
  for (const auto& layer : model.layers) {
    layers.append(py::make_tuple(layer->name(), layer->op()));
    for (const train::Parameter* p : layer->parameters()) params[py::str(p->name)] = to_numpy(p->value);
  }
  const std::size_t n = data.train.size(), batch = c.batch_size;
  const std::size_t per_epoch = (n + batch - 1) / batch;
  py::list batches;
  for (std::int64_t step = 0, epoch = 0; step < steps; ++epoch) {
    const auto order = train::epoch_order(n, c.seed, std::uint64_t(epoch));
    for (std::size_t b = 0; b < per_epoch && step < steps; ++b, ++step) {
      const std::vector<std::size_t> idx(order.begin() + long(b * batch),
                                         order.begin() + long(std::min(n, (b + 1) * batch)));
      batches.append(py::make_tuple(to_numpy(data.train.batch(idx)), py::cast(data.train.targets(idx))));
    }
  }
  // The test set in the evaluation's batches (score() in network.cpp).
  py::list test;
  const std::size_t tn = data.test.size(), tb = c.eval_batch_size;
  for (std::size_t start = 0; start < tn; start += tb) {
    std::vector<std::size_t> idx;
    for (std::size_t i = start; i < std::min(tn, start + tb); ++i) idx.push_back(i);
    test.append(py::make_tuple(to_numpy(data.test.batch(idx)), py::cast(data.test.targets(idx))));
  }
  py::dict d;
  d["test_batches"] = test;
  d["parameters"] = params;
  d["layers"] = layers;
  d["batches"] = batches;
  d["policy"] = c.policy.name;
  d["channels"] = data.train.channels;
  // The gpt row's sizes (the parameters do not say the heads).
  py::dict gpt;
  gpt["n_layer"] = c.model.n_layer;
  gpt["n_embd"] = c.model.n_embd;
  gpt["n_head"] = c.model.n_head;
  gpt["block_size"] = c.model.block_size;
  d["gpt"] = gpt;
  return d;
}

// One of the op table's losses under a policy: forward(logits, format,
// labels) -> the loss; backward(scale) -> the logits' gradient.
class TorchLoss {
 public:
  TorchLoss(const std::string& op, const py::object& policy) {
    const train::OpInfo* info = train::find_op(op);
    if (!info || !info->loss)
      throw py::value_error(
          fmt::format("loss '{}' is not a loss of the op table ({})", op,
                      train::op_list([](const train::OpInfo& o) { return o.loss != nullptr; })));
    policy_ = policy_arg(policy);
    loss_ = info->loss();
  }
  double forward(py::handle logits, const std::string& format, const std::vector<int>& labels) {
    const train::Matrix z = matrix_arg(logits, "logits");
    if (std::size_t(z.rows()) != labels.size())
      throw py::value_error(
          fmt::format("logits have {} rows but there are {} labels", z.rows(), labels.size()));
    for (const int y : labels)
      if (y < 0 || y >= z.cols()) throw py::value_error(fmt::format("label {} outside [0, {})", y, z.cols()));
    const train::StepContext ctx{&policy_, 0, 0};
    return loss_->forward(train::Tensor{z, &format_arg(format)}, labels, ctx);
  }
  // The gradient and the count of its entries the loss's roundings flushed
  // (steps.csv's activation_grad_underflow of the logits' layer).
  py::tuple backward(double scale) {
    const train::StepContext ctx{&policy_, 0, 0};
    const train::Tensor g = loss_->backward(scale, ctx);
    return py::make_tuple(to_numpy(g.values), g.underflow_count());
  }

 private:
  train::PrecisionPolicy policy_;
  std::unique_ptr<train::Loss> loss_;
};

// A layer of the op table without arguments of its own (gelu, relu,
// layer_norm), built by its row's factory, as a kernel: forward(x, format,
// parameters) -> (y, y's format); backward(dy, format) -> (dx, entries the
// rounding of dx flushed, parameter gradients, their flushed counts). One
// object per use: it keeps what its forward saved for its backward.
class TorchLayer {
 public:
  TorchLayer(const std::string& op, const py::object& policy, std::int64_t features) {
    const train::OpInfo* info = train::find_op(op);
    if (!info || !info->layer)
      throw py::value_error(
          fmt::format("op '{}' is not a layer of the op table ({})", op,
                      train::op_list([](const train::OpInfo& o) { return o.layer != nullptr; })));
    policy_ = policy_arg(policy);
    train::LayerShape shape{features};
    layer_ = info->layer(op, nlohmann::json{{"op", op}}, "layer", shape);
  }
  py::tuple forward(py::handle x, const std::string& format, const std::vector<py::handle>& params) {
    const auto ps = layer_->parameters();
    if (ps.size() != params.size())
      throw py::value_error(
          fmt::format("{}: {} parameters given, the layer has {}", layer_->op(), params.size(), ps.size()));
    for (std::size_t i = 0; i < ps.size(); ++i) ps[i]->value = matrix_arg(params[i], "parameter");
    const train::Tensor y = layer_->forward(train::Tensor{matrix_arg(x, "x"), &format_arg(format)}, ctx());
    return py::make_tuple(to_numpy(y.values), y.format->name);
  }
  py::tuple backward(py::handle dy, const std::string& format) {
    const train::Tensor g =
        layer_->backward(train::Tensor{matrix_arg(dy, "dy"), &format_arg(format)}, ctx(), true);
    py::list grads, flushed;
    for (const train::Parameter* p : layer_->parameters()) {
      grads.append(to_numpy(p->grad));
      flushed.append(p->grad_underflow);
    }
    return py::make_tuple(to_numpy(g.values), g.underflow_count(), grads, flushed);
  }

 private:
  train::StepContext ctx() const { return train::StepContext{&policy_, 0, 0}; }
  train::PrecisionPolicy policy_;
  std::unique_ptr<train::Layer> layer_;
};

// The entries of a sequence of float32/float64 arrays, each read in C order
// (a transposed view's rows), one after another as one column: the layer's
// parameters flattened in order, without the concatenated copy torch.cat made.
// A float32 piece is widened straight into the column. The column lives in
// `buffer`, kept between calls: two fresh columns per layer and step were
// mapped and faulted in page by page (a 200,960-entry layer: 2.3-2.8 ms a
// call, most of it page faults, against 0.46-0.50 ms now). Aligned as an
// Eigen vector's storage, so Eigen's vectorised norm walks the same packets.
using Column = std::vector<double, Eigen::aligned_allocator<double>>;
Eigen::Map<const train::Matrix, Eigen::Aligned16> column_of(py::handle pieces, const char* what,
                                                            Column& buffer) {
  using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
  using F64 = py::array_t<double, py::array::c_style | py::array::forcecast>;
  std::vector<py::array> arrays;
  py::ssize_t n = 0;
  for (py::handle piece : pieces) {
    const bool f32 = py::isinstance<py::array>(piece) &&
                     py::reinterpret_borrow<py::array>(piece).dtype().is(py::dtype::of<float>());
    py::object a = f32 ? py::object(F32::ensure(piece)) : py::object(F64::ensure(piece));
    if (!a) throw py::type_error(fmt::format("rel_distance: {}: a sequence of float arrays is needed", what));
    arrays.push_back(py::reinterpret_steal<py::array>(a.release()));
    n += arrays.back().size();
  }
  if (buffer.size() < std::size_t(n)) buffer.resize(std::size_t(n));
  double* out = buffer.data();
  for (const py::array& a : arrays)
    out = a.dtype().is(py::dtype::of<float>())
              ? std::copy_n(static_cast<const float*>(a.data()), a.size(), out)
              : std::copy_n(static_cast<const double*>(a.data()), a.size(), out);
  return {buffer.data(), n, 1};
}

// telemetry.cpp's weight_rel_distance_from_fp64 on a layer's parameters,
// emulated and shadow, each a sequence of arrays: Eigen's norm of one column,
// whose summation order its vectorisation picks, so the same expression
// compiled the same way gives the same bits.
double rel_distance_py(py::handle emulated, py::handle shadow) {
  static thread_local Column emulated_buffer, shadow_buffer;
  const auto we = column_of(emulated, "emulated", emulated_buffer),
             ws = column_of(shadow, "shadow", shadow_buffer);
  if (we.size() != ws.size())
    throw py::value_error(fmt::format("rel_distance: {} emulated entries, {} shadow", we.size(), ws.size()));
  const double denom = ws.norm();
  return denom > 0 ? (we - ws).norm() / denom : (we - ws).norm();
}

// The attention's softmax kernels (layers/attention.cpp) over the rows of a
// 2-D array, in compute format `format`: entries -inf (masked_fill's mask)
// take no part and come out 0, so a causal mask gives the CLI's bits.
train::Mask kept(const train::Matrix& scores) {
  return scores.array() != -std::numeric_limits<double>::infinity();
}

py::array softmax_py(py::handle scores, const std::string& format) {
  const train::Matrix s = matrix_arg(scores, "scores");
  return to_numpy(train::softmax_rows(s, format_arg(format), kept(s)));
}

py::array softmax_backward_py(py::handle p, py::handle dp, py::handle scores, const std::string& format) {
  const train::Matrix pm = matrix_arg(p, "p"), dpm = matrix_arg(dp, "dp"), s = matrix_arg(scores, "scores");
  if (pm.rows() != dpm.rows() || pm.cols() != dpm.cols() || s.rows() != pm.rows() || s.cols() != pm.cols())
    throw py::value_error(fmt::format("softmax backward: p is {}x{}, dp {}x{}, scores {}x{}", pm.rows(),
                                      pm.cols(), dpm.rows(), dpm.cols(), s.rows(), s.cols()));
  return to_numpy(train::softmax_rows_backward(pm, dpm, format_arg(format), kept(s)));
}

// The config's learning-rate schedule as the trainer reads it
// (OptimizerConfig::lr_at: warmup and cosine decay, or DeepSpeed's scheduler
// on the count of applied steps), a callable (step, applied) -> lr.
py::cpp_function lr_schedule_py(const py::object& config, const std::vector<std::string>& overrides) {
  const train::OptimizerConfig o = config_arg(config, overrides).parse().optimizer;
  return py::cpp_function([o](std::int64_t step, std::int64_t applied) { return o.lr_at(step, applied); },
                          py::arg("step"), py::arg("applied"));
}

}  // namespace

void bind_torch_train(py::module_& m) {
  using py::arg;
  m.def("_torch_train_setup", &setup_py, arg("config"), arg("overrides"), arg("steps"),
        "A training config's initial parameters and first batches, as `rpsim train` draws them.");
  m.def("_torch_rel_distance", &rel_distance_py, arg("emulated"), arg("shadow"),
        "|e - s| / |s| (|e - s| where |s| = 0) as steps.csv's weight_rel_distance_from_fp64 computes it, "
        "e and s each a sequence of float arrays read in C order, one after another.");
  m.def("_torch_lr_schedule", &lr_schedule_py, arg("config"), arg("overrides"),
        "A config's learning rate per step, as `rpsim train` sets it: a callable (step, applied) -> lr.");
  m.def("_torch_softmax", &softmax_py, arg("scores"), arg("format"),
        "rpsim train's attention softmax over each row of a 2-D array (-inf entries masked), in `format`.");
  m.def("_torch_softmax_backward", &softmax_backward_py, arg("p"), arg("dp"), arg("scores"), arg("format"),
        "Its backward: ds = p (dp - sum(dp p)) per row over the entries the forward's scores kept.");
  py::class_<TorchLayer>(m, "_TorchLayer")
      .def(py::init<const std::string&, const py::object&, std::int64_t>(), arg("op"), arg("policy"),
           arg("features"))
      .def("forward", &TorchLayer::forward, arg("x"), arg("format"), arg("parameters"))
      .def("backward", &TorchLayer::backward, arg("dy"), arg("format"));
  py::class_<TorchLoss>(m, "_TorchLoss")
      .def(py::init<const std::string&, const py::object&>(), arg("op"), arg("policy"))
      .def("forward", &TorchLoss::forward, arg("logits"), arg("format"), arg("labels"))
      .def("backward", &TorchLoss::backward, arg("scale"));
}

}  // namespace rpsim::python
