// Shared by the layer tests: random matrices and the check of a layer's
// derivatives against central finite differences in binary64.
#pragma once

#include <catch2/catch.hpp>

#include "rpsim/formats/random.hpp"
#include "rpsim/train/layers.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::sim::train::testing {

inline Matrix random_matrix(Eigen::Index r, Eigen::Index c, std::uint64_t stream, double scale = 1.0) {
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = scale * (double(counter_random(7, stream, std::uint64_t(i)) >> 11) * 0x1.0p-53 * 2 - 1);
  return m;
}

// f(x) = sum(R .* layer(x)); df/dy = R.
inline double objective(Layer& layer, const Matrix& x, const Matrix& r, const StepContext& ctx) {
  const Tensor y = layer.forward(Tensor{x, &formats::binary64()}, ctx);
  return y.values.cwiseProduct(r).sum();
}

// Checks d f / d x (unless `input_grad` is false) and d f / d parameters
// against central differences.
inline void check_layer(Layer& layer, const Matrix& x0, double tol = 1e-6, bool input_grad = true) {
  const PrecisionPolicy fp64 = named_policy("fp64");
  const StepContext ctx{&fp64, 0, 0};
  const Tensor y = layer.forward(Tensor{x0, &formats::binary64()}, ctx);
  const Matrix r = random_matrix(y.values.rows(), y.values.cols(), 99);
  const Tensor dx = layer.backward(Tensor{r, &formats::binary64()}, ctx, input_grad);
  std::vector<Matrix> grads;
  for (Parameter* p : layer.parameters()) grads.push_back(p->grad);
  const double h = 1e-6;
  Matrix x = x0;
  for (Eigen::Index i = 0; input_grad && i < x.size(); ++i) {
    const double keep = x.data()[i];
    x.data()[i] = keep + h;
    const double up = objective(layer, x, r, ctx);
    x.data()[i] = keep - h;
    const double down = objective(layer, x, r, ctx);
    x.data()[i] = keep;
    INFO(layer.name() << " input " << i);
    CHECK(dx.values.data()[i] == Approx((up - down) / (2 * h)).margin(tol).epsilon(1e-5));
  }
  auto params = layer.parameters();
  for (std::size_t k = 0; k < params.size(); ++k) {
    Matrix& w = params[k]->value;
    for (Eigen::Index i = 0; i < w.size(); ++i) {
      const double keep = w.data()[i];
      w.data()[i] = keep + h;
      const double up = objective(layer, x0, r, ctx);
      w.data()[i] = keep - h;
      const double down = objective(layer, x0, r, ctx);
      w.data()[i] = keep;
      INFO(params[k]->name << " entry " << i);
      CHECK(grads[k].data()[i] == Approx((up - down) / (2 * h)).margin(tol).epsilon(1e-5));
    }
  }
}

}  // namespace rpsim::sim::train::testing
