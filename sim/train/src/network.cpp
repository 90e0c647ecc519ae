// One forward and backward pass, and evaluation.
#include "network.hpp"

#include <algorithm>
#include <vector>

#include "rpsim/scaling/adaptive_loss_scaling.hpp"

namespace rpsim::sim::train {
namespace {

// Index of the largest entry of each row (the first on ties).
std::vector<int> argmax_rows(const Matrix& m) {
  std::vector<int> out(std::size_t(m.rows()));
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    Eigen::Index best = 0;
    for (Eigen::Index j = 1; j < m.cols(); ++j)
      if (m(i, j) > m(i, best)) best = j;
    out[std::size_t(i)] = int(best);
  }
  return out;
}

std::vector<float> as_floats(const Matrix& m) {
  return std::vector<float>(m.data(), m.data() + m.size());
}

// Zhao et al.'s per-layer factor at a layer with a GEMM weight (AdaLoss's
// loss_scaling: the gradient arriving at the layer is multiplied by it before
// the layer's backward GEMMs); a power of two, so exact unless it leaves the
// gradient's range, hence the rounding. Layers without a weight (and a GPT's
// residual blocks, whose branches AdaLoss would rescale where they meet) pass
// the scale through. Returns the scale the gradient now carries.
double adaptive_scale(const AdaptiveLossScaling& ada, const Layer& layer, Tensor& dy, double carried) {
  const Matrix* w = layer.gemm_weight();
  if (!w || dy.values.size() == 0) return carried;
  const double s = ada.layer_scale(AdaptiveLayerInput{moments_of(as_floats(dy.values)),
                                                      moments_of(as_floats(*w)), std::int64_t(w->cols())},
                                   carried);
  if (s != 1.0) dy.values = rounded(*dy.format, dy.values * s);
  return carried * s;
}

}  // namespace

double forward_backward(Network& net, const Matrix& x, const std::vector<int>& labels, double scale,
                        const StepContext& ctx, const AdaptiveLossScaling* adaptive) {
  // The policy's rounding for every tensor of the pass (Gupta et al. 2015:
  // "sr"), one stream per step, distinct from the optimizer's.
  const ScopedTensorRounding rounding(net.policy->rounding, RandomStream{ctx.seed, ~ctx.step});
  Tensor t{rounded(*net.policy->data, x), net.policy->data};
  for (auto& layer : net.model.layers) t = layer->forward(t, ctx);
  const double loss = net.model.loss->forward(t, labels, ctx);
  Tensor dy = net.model.loss->backward(scale, ctx);
  net.activation_grads.assign(net.model.layers.size(), Tensor{});
  net.grad_scales.assign(net.model.layers.size(), scale);
  double carried = scale;
  for (std::size_t i = net.model.layers.size(); i-- > 0;) {
    if (adaptive) carried = adaptive_scale(*adaptive, *net.model.layers[i], dy, carried);
    net.grad_scales[i] = carried;
    net.activation_grads[i] = dy;
    dy = net.model.layers[i]->backward(dy, ctx, i > 0);
  }
  return loss;
}

TestScore score(Model& model, const PrecisionPolicy& policy, const Dataset& test, std::size_t batch,
                const StepContext& ctx) {
  std::size_t correct = 0, rows = 0;
  double loss_sum = 0;
  std::vector<std::size_t> idx;
  for (std::size_t start = 0; start < test.size(); start += batch) {
    idx.clear();
    for (std::size_t i = start; i < std::min(test.size(), start + batch); ++i) idx.push_back(i);
    Tensor t{rounded(*policy.data, test.batch(idx)), policy.data};
    for (auto& layer : model.layers) t = layer->forward(t, ctx);
    const std::vector<int> labels = test.targets(idx), pred = argmax_rows(t.values);
    for (std::size_t k = 0; k < labels.size(); ++k) correct += pred[k] == labels[k];
    loss_sum += model.loss->forward(t, labels, ctx) * double(labels.size());
    rows += labels.size();
  }
  TestScore s;
  if (rows) {
    s.accuracy_percent = 100.0 * double(correct) / double(rows);
    s.loss_nats = loss_sum / double(rows);
  }
  return s;
}

}  // namespace rpsim::sim::train
