// Unscaling, the gradient norm and clipping (step_ops.hpp).
#include "rpsim/train/step_ops.hpp"

#include <cmath>

#include "rpsim/train/tensor.hpp"

namespace rpsim::sim::train {
namespace {

// g * factor rounded to f (nearest even), in place; the flushed entries.
std::int64_t multiply(std::span<double> g, double factor, const Format& f) {
  const ValueRounding& r = nearest_rounding(f);
  std::int64_t flushed = 0;
  for (double& x : g) {
    const double before = x;
    x = r(before * factor);
    flushed += before != 0 && x == 0;
  }
  return flushed;
}

}  // namespace

double unscale_factor(double scale) {
  return round_value(formats::binary32(), 1.0 / scale);
}

Unscaled unscale(std::span<double> g, double inv, const Format& gradients) {
  Unscaled u;
  if (inv != 1.0) u.flushed = multiply(g, inv, gradients);
  for (const double x : g)
    if (!std::isfinite(x)) {
      u.nonfinite = true;
      break;
    }
  return u;
}

const Format& norm_format(const PrecisionPolicy& policy) {
  return formats::binary32().bits <= policy.optimizer_compute->bits ? *policy.optimizer_compute
                                                                    : formats::binary32();
}

double grad_norm(const std::vector<std::span<const double>>& grads, const Format& c) {
  const ValueRounding& r = nearest_rounding(c);
  double total = 0;
  std::vector<double> sq;
  for (const std::span<const double> g : grads) {
    sq.resize(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) sq[i] = r(g[i] * g[i]);
    const double s = sequential_sum(c, sq.data(), Eigen::Index(sq.size()));
    total = r(total + s);
  }
  return r(std::sqrt(total));
}

double clip_coefficient(double max_norm, double norm, const Format& c) {
  return round_value(c, max_norm / round_value(c, norm + 1e-6));
}

std::int64_t scale_gradient(std::span<double> g, double coef, const Format& gradients) {
  return multiply(g, coef, gradients);
}

std::int64_t accumulate_gradient(std::span<double> sum, std::span<const double> g, const Format& f,
                                 bool first) {
  std::vector<double> exact(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) exact[i] = first ? g[i] : sum[i] + g[i];
  nearest_rounding(f)(std::span<const double>(exact), sum);
  std::int64_t flushed = 0;
  for (std::size_t i = 0; i < g.size(); ++i) flushed += exact[i] != 0 && sum[i] == 0;
  return flushed;
}

}  // namespace rpsim::sim::train
