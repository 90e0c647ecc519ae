// FP8 per-tensor (Transformer Engine) and MX block (OCP MX v1.0) quantisation.
#include <algorithm>
#include <cmath>

#include "common.hpp"

namespace rpsim::sim::train {
using namespace detail;

double fp8_scale(const Matrix& x, const Format& f, const Fp8Recipe& recipe, Fp8ScaleState& state,
                 Fp8Stats* stats) {
  // TE's amax reduction, fmaxf(amax, |x|): NaN elements skipped, inf kept.
  double amax_now = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i) amax_now = std::fmax(amax_now, std::fabs(x.data()[i]));
  const auto fp8_max = static_cast<float>(f.max_finite());
  double scale;
  if (recipe.scaling == Fp8Scaling::delayed) {
    if (!state.delayed)
      state.delayed.emplace(sim::DelayedScalingConfig{fp8_max, recipe.margin,
                                                      static_cast<std::size_t>(recipe.amax_history_len),
                                                      recipe.amax_compute_algo});
    scale = state.delayed->scale();
    state.delayed->record_amax(static_cast<float>(amax_now));
    state.delayed->update();
  } else {
    // Float8CurrentScaling has no margin; rpsim's recipe applies it to the
    // fp8 maximum as DelayedScaling does (exact: a power of two).
    scale = sim::current_scale_from_amax(static_cast<float>(amax_now),
                                         sim::CurrentScalingConfig{std::ldexp(fp8_max, -recipe.margin)});
  }
  if (stats) {
    stats->amax = amax_now;
    stats->scale_min = stats->scale_max = scale;
  }
  return scale;
}

Matrix fp8_quantize(const Matrix& x, const Format& f, double scale, Fp8Stats* stats) {
  const double mx = f.max_finite();
  Matrix q(x.rows(), x.cols());
  std::int64_t saturated = 0, flushed = 0;
  const ValueRounding &r32 = nearest_rounding(f32()), &rf = nearest_rounding(f);
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    double v = r32(x.data()[i] * scale);
    saturated += std::isfinite(v) && std::fabs(v) > mx;
    if (std::isfinite(v)) v = std::clamp(v, -mx, mx);
    q.data()[i] = rf(v);
    flushed += x.data()[i] != 0 && q.data()[i] == 0;
  }
  if (stats) {
    stats->entries += x.size();
    stats->saturated += saturated;
    stats->flushed += flushed;
  }
  return q;
}

namespace {

// Widens the range of block scales in `s` to hold `m` (a multiplier, 1 / X).
void widen(Fp8Stats& s, double m) {
  s.scale_min = std::isnan(s.scale_min) ? m : std::min(s.scale_min, m);
  s.scale_max = std::isnan(s.scale_max) ? m : std::max(s.scale_max, m);
}

}  // namespace

Matrix mx_quantize(const Matrix& x, const Format& f, int block, int axis, Fp8Stats* stats) {
  Matrix out(x.rows(), x.cols());
  const Eigen::Index lines = axis == 1 ? x.rows() : x.cols();
  const Eigen::Index length = axis == 1 ? x.cols() : x.rows();
  auto at = [&](const Matrix& m, Eigen::Index line, Eigen::Index k) -> const double& {
    return axis == 1 ? m(line, k) : m(k, line);
  };
  const double mx = f.max_finite();
  const ValueRounding& rf = nearest_rounding(f);
  Fp8Stats s;
  for (Eigen::Index line = 0; line < lines; ++line)
    for (Eigen::Index k0 = 0; k0 < length; k0 += block) {
      const Eigen::Index k1 = std::min<Eigen::Index>(length, k0 + block);
      double amax = 0;
      for (Eigen::Index k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(at(x, line, k)));
      s.amax = std::max(s.amax, amax);
      // OCP MX v1.0 section 6.3: X = 2^(floor(log2(amax)) - emax_elem).
      const bool scaled = amax > 0 && std::isfinite(amax);
      const int shared = scaled ? std::ilogb(amax) - f.emax : 0;
      const double scale = std::ldexp(1.0, std::clamp(shared, -127, 127));
      if (scaled) widen(s, 1.0 / scale);  // exact: a power of two
      for (Eigen::Index k = k0; k < k1; ++k) {
        double v = at(x, line, k) / scale;
        s.saturated += std::isfinite(v) && std::fabs(v) > mx;
        if (std::isfinite(v)) v = std::clamp(v, -mx, mx);
        const double q = rf(v) * scale;
        s.flushed += at(x, line, k) != 0 && q == 0;
        const_cast<double&>(at(out, line, k)) = q;
      }
    }
  if (stats) {
    // Every use of the tensor in a step adds to the same record.
    stats->amax = std::max(stats->amax, s.amax);
    if (!std::isnan(s.scale_min)) {
      widen(*stats, s.scale_min);
      widen(*stats, s.scale_max);
    }
    stats->entries += x.size();
    stats->saturated += s.saturated;
    stats->flushed += s.flushed;
  }
  return out;
}

}  // namespace rpsim::sim::train
