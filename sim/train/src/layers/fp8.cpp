// FP8 per-tensor (Transformer Engine) and block-scaled (OCP MX v1.0, NVFP4)
// quantisation of GEMM inputs, and the random Hadamard transform.
#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

#include "rpsim/formats/block_scale.hpp"
#include "rpsim/formats/random.hpp"

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

Matrix hadamard_transform(int n, std::uint64_t seed) {
  if (n < 1 || (n & (n - 1)) != 0)
    throw std::invalid_argument("hadamard: size must be a power of two, got " + std::to_string(n));
  // Sylvester's H_ij = (-1)^popcount(i & j), columns times random signs,
  // over sqrt(n): orthogonal, so T^T T = I.
  Matrix t(n, n);
  const double norm = 1.0 / std::sqrt(double(n));
  for (int j = 0; j < n; ++j) {
    const double sign = (counter_random(seed, 0x5248545369676e73ull, std::uint64_t(j)) & 1) ? -1.0 : 1.0;
    for (int i = 0; i < n; ++i) t(i, j) = (std::popcount(unsigned(i & j)) & 1 ? -norm : norm) * sign;
  }
  return t;
}

Matrix hadamard_rows(const Matrix& m, const Matrix& t) {
  Matrix out = m;
  const Eigen::Index n = t.rows();
  for (Eigen::Index r0 = 0; r0 + n <= m.rows(); r0 += n) out.middleRows(r0, n) = t * m.middleRows(r0, n);
  // The quantiser reads binary32, as TE's fused RHT-and-cast kernel does.
  round_in_place(f32(), out, RoundingMode::nearest_even);
  return out;
}

}  // namespace rpsim::sim::train
