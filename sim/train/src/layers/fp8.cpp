// FP8 per-tensor (Transformer Engine) and MX block (OCP MX v1.0) quantisation.
#include <algorithm>
#include <cmath>

#include "common.hpp"

namespace rpsim::sim::train {
using namespace detail;

double fp8_scale(const Matrix& x, const Format& f, const Fp8Recipe& recipe, AmaxHistory& history) {
  const double amax_now = x.size() ? x.cwiseAbs().maxCoeff() : 0.0;
  double amax = amax_now;
  if (recipe.scaling == Fp8Scaling::delayed && !history.values.empty()) {
    amax = recipe.amax_compute_algo == "most_recent"
               ? history.values.back()
               : *std::max_element(history.values.begin(), history.values.end());
  }
  if (recipe.scaling == Fp8Scaling::delayed) {
    history.values.push_back(amax_now);
    if (int(history.values.size()) > recipe.amax_history_len) history.values.erase(history.values.begin());
  }
  // Transformer Engine keeps scale 1 when amax is zero or not finite.
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0;
  return round_value(f32(), f.max_finite() / amax / std::ldexp(1.0, recipe.margin));
}

Matrix fp8_quantize(const Matrix& x, const Format& f, double scale) {
  const double mx = f.max_finite();
  Matrix q(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    double v = round_value(f32(), x.data()[i] * scale);
    if (std::isfinite(v)) v = std::clamp(v, -mx, mx);
    q.data()[i] = round_value(f, v);
  }
  return q;
}

Matrix mx_quantize(const Matrix& x, const Format& f, int block, int axis) {
  Matrix out(x.rows(), x.cols());
  const Eigen::Index lines = axis == 1 ? x.rows() : x.cols();
  const Eigen::Index length = axis == 1 ? x.cols() : x.rows();
  auto at = [&](const Matrix& m, Eigen::Index line, Eigen::Index k) -> const double& {
    return axis == 1 ? m(line, k) : m(k, line);
  };
  const double mx = f.max_finite();
  for (Eigen::Index line = 0; line < lines; ++line)
    for (Eigen::Index k0 = 0; k0 < length; k0 += block) {
      const Eigen::Index k1 = std::min<Eigen::Index>(length, k0 + block);
      double amax = 0;
      for (Eigen::Index k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(at(x, line, k)));
      // OCP MX v1.0 section 6.3: X = 2^(floor(log2(amax)) - emax_elem).
      const int shared = amax > 0 && std::isfinite(amax) ? std::ilogb(amax) - f.emax : 0;
      const double scale = std::ldexp(1.0, std::clamp(shared, -127, 127));
      for (Eigen::Index k = k0; k < k1; ++k) {
        double v = at(x, line, k) / scale;
        if (std::isfinite(v)) v = std::clamp(v, -mx, mx);
        const_cast<double&>(at(out, line, k)) = round_value(f, v) * scale;
      }
    }
  return out;
}

}  // namespace rpsim::sim::train
