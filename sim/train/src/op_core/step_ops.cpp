// Unscaling, the gradient norm and clipping (step_ops.hpp).
#include "rpsim/train/step_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "rpsim/train/tensor.hpp"

namespace rpsim::sim::train {
namespace {

// Elements a chunk: the products are rounded by the array kernel (the vector
// path of ValueRounding, the bits of its one-value call) from a buffer on the
// stack, where a call per element kept the loop scalar (unscale was 3.7% of an
// MLP step).
constexpr std::size_t kChunk = 512;

// g * factor rounded to f (nearest even), in place; the flushed entries.
std::int64_t multiply(std::span<double> g, double factor, const Format& f) {
  const ValueRounding& r = nearest_rounding(f);
  std::int64_t flushed = 0;
  double before[kChunk];
  for (std::size_t i0 = 0; i0 < g.size(); i0 += kChunk) {
    const std::size_t n = std::min(kChunk, g.size() - i0);
    double* x = g.data() + i0;
    for (std::size_t i = 0; i < n; ++i) {
      before[i] = x[i];
      x[i] *= factor;
    }
    r(std::span<const double>(x, n), std::span<double>(x, n));
    for (std::size_t i = 0; i < n; ++i) flushed += (before[i] != 0) & (x[i] == 0);
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
  // No early exit: a branch-free pass vectorises (!(|x| <= max) is true for
  // infinities and NaNs alike).
  bool nonfinite = false;
  for (const double x : g) nonfinite |= !(std::abs(x) <= std::numeric_limits<double>::max());
  u.nonfinite = nonfinite;
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
    for (std::size_t i = 0; i < g.size(); ++i) sq[i] = g[i] * g[i];
    r(std::span<const double>(sq), std::span<double>(sq));  // the array kernel: one call's bits
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
