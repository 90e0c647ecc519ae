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

namespace {

// Widens the range of block scales in `s` to hold `m` (a multiplier, 1 / X).
void widen(Fp8Stats& s, double m) {
  s.scale_min = std::isnan(s.scale_min) ? m : std::min(s.scale_min, m);
  s.scale_max = std::isnan(s.scale_max) ? m : std::max(s.scale_max, m);
}

}  // namespace

namespace {

// The values of `x` one group at a time: a line (axis 1: a row, 0: a
// column) or, with tiles, a block x block tile read row by row.
struct Groups {
  const Matrix& x;
  int axis, block;
  bool tiles;
  Eigen::Index rows() const { return tiles ? (x.rows() + block - 1) / block : axis == 1 ? x.rows() : 1; }
  Eigen::Index cols() const { return tiles ? (x.cols() + block - 1) / block : axis == 1 ? 1 : x.cols(); }
  // Visits the entries of group (gi, gj) in order: f(row, col).
  template <class F>
  void each(Eigen::Index gi, Eigen::Index gj, F f) const {
    const Eigen::Index r0 = tiles ? gi * block : axis == 1 ? gi : 0;
    const Eigen::Index c0 = tiles ? gj * block : axis == 1 ? 0 : gj;
    const Eigen::Index r1 = tiles       ? std::min<Eigen::Index>(x.rows(), r0 + block)
                            : axis == 1 ? r0 + 1
                                        : x.rows();
    const Eigen::Index c1 = tiles       ? std::min<Eigen::Index>(x.cols(), c0 + block)
                            : axis == 1 ? x.cols()
                                        : c0 + 1;
    for (Eigen::Index r = r0; r < r1; ++r)
      for (Eigen::Index c = c0; c < c1; ++c) f(r, c);
  }
};

const Format& e2m1() {
  static const Format& f = rpsim::format("e2m1");
  return f;
}

}  // namespace

Matrix block_quantize(const Matrix& x, const Format& f, const Fp8Recipe& recipe, const BlockLayout& layout,
                      Fp8Stats* stats, double* tensor_scale, Matrix* scales) {
  const bool nv = recipe.scaling == Fp8Scaling::nvfp4;
  if (nv && f != e2m1())
    throw std::invalid_argument("nvfp4 quantises to e2m1 elements, the op rule names " + f.name);
  const auto block = static_cast<std::size_t>(recipe.block_size);
  // NVFP4's per-tensor FP32 scale comes from the whole tensor's amax.
  double tensor_amax = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i) tensor_amax = std::fmax(tensor_amax, std::fabs(x.data()[i]));
  const Groups groups{x, layout.axis, recipe.block_size, layout.tiles};
  const double elem_max = nv ? 6.0 : f.max_finite();
  Matrix out(x.rows(), x.cols());
  if (scales) scales->resize(x.rows(), x.cols());
  Fp8Stats s;
  s.amax = tensor_amax;
  std::vector<double> v;
  for (Eigen::Index gi = 0; gi < groups.rows(); ++gi)
    for (Eigen::Index gj = 0; gj < groups.cols(); ++gj) {
      v.clear();
      groups.each(gi, gj, [&](Eigen::Index r, Eigen::Index c) { v.push_back(x(r, c)); });
      // A tile shares one scale; a line has one per `block` entries.
      const std::size_t b = layout.tiles ? v.size() : block;
      ElementRounding er;
      if (layout.sr) {
        er.mode = RoundingMode::stochastic;
        er.seed = layout.sr->seed;
        er.stream = mix64(layout.sr->stream ^ mix64(std::uint64_t(gi * groups.cols() + gj)));
      }
      const BlockQuantized q = nv ? nvfp4_quantize(v, b, tensor_amax, er) : mx_quantize(f, v, b, er);
      // Element times its block's scale: what the block-scaled MMA
      // multiplies (exact in binary32); the tensor scale is the epilogue's.
      std::vector<double> d(v.size());
      for (std::size_t i = 0; i < d.size(); ++i) d[i] = q.elements[i] * q.scales[i / b];
      // x ~ d / s_enc: q.tensor_scale = 1 / s_enc with s_enc a float, which
      // the double reciprocal gives back exactly once rounded to float.
      if (tensor_scale) *tensor_scale = static_cast<float>(1.0 / q.tensor_scale);
      std::vector<char> nonzero(q.scales.size(), 0);
      std::size_t k = 0;
      groups.each(gi, gj, [&](Eigen::Index r, Eigen::Index c) {
        const double scale = q.scales[k / b] * q.tensor_scale;  // the block's decoding scale
        s.saturated += std::isfinite(v[k]) && std::fabs(v[k]) > elem_max * scale;
        s.flushed += v[k] != 0 && d[k] == 0;
        nonzero[k / b] |= v[k] != 0;
        if (scales) (*scales)(r, c) = q.scales[k / b];
        out(r, c) = d[k++];
      });
      // The scale range over blocks with a nonzero amax (an all-zero block's
      // scale, 2^-127 in MX, says nothing about the tensor).
      for (std::size_t i = 0; i < q.scales.size(); ++i)
        if (nonzero[i] && q.scales[i] > 0 && std::isfinite(q.scales[i]))
          widen(s, 1.0 / (q.scales[i] * q.tensor_scale));
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

Matrix mx_quantize(const Matrix& x, const Format& f, int block, int axis, Fp8Stats* stats) {
  Fp8Recipe r;
  r.scaling = Fp8Scaling::mx;
  r.block_size = block;
  return block_quantize(x, f, r, BlockLayout{axis}, stats);
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
