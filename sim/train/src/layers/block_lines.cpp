// block_quantize_recipe's line path (block_operand.cpp calls it): MX scales with FP8
// elements and NVFP4, to nearest or stochastically, by lines, panels or
// tiles gathered as binary32, each block's scale and each entry's value found
// for a whole run of entries at once; the bits and statistics of the
// element-by-element quantiser (recipe::quantize_group_block), which the
// tests compare it with.
#include "block_lines.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "rpsim/formats/cpu_features.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/recipe.hpp"

namespace rpsim::sim::train::detail {

namespace {

// Each entry's element value, entry k scaled by f[k]: a loop of selects (the
// shared element functions have no branches) that GCC vectorises, 8 lanes on
// AVX2, 16 on AVX-512 (with -fno-trapping-math: sim/CMakeLists.txt). On a Zen 2 core NVFP4's
// element took 11.6 ns with branches (mispredicted on signs), 3.5 ns so.
template <class Element>
inline void element_values(const Element& element, const float* __restrict v, const float* __restrict f,
                           float* __restrict e, std::size_t n) {
  const Element local = element;  // its captures in registers, not reloaded past the stores
  for (std::size_t k = 0; k < n; ++k) e[k] = local(v[k], f[k]);
}
template <class Element>
__attribute__((target("avx2"))) void element_values_avx2(const Element& element, const float* v,
                                                         const float* f, float* e, std::size_t n) {
  element_values(element, v, f, e, n);
}
template <class Element>
__attribute__((target("avx512f"))) void element_values_avx512(const Element& element, const float* v,
                                                              const float* f, float* e, std::size_t n) {
  element_values(element, v, f, e, n);
}
template <class Element>
void element_values_best(const Element& element, const float* v, const float* f, float* e, std::size_t n) {
  if (cpu_features().avx512f)
    element_values_avx512(element, v, f, e, n);
  else if (cpu_features().avx2)
    element_values_avx2(element, v, f, e, n);
  else
    element_values(element, v, f, e, n);
}

// An amax as recipe::nan_max finds it, from integers: |v|'s bits order as the
// magnitudes do, with a NaN above every other value (an infinity's
// 0x7f800000 included), so their max is the amax's, NaN (the canonical one,
// as nan_max gives) where some entry is one. A max of integers vectorises
// where nan_max's branches kept the loops scalar (the whole-tensor amax below
// and the blocks' in Nearest: a fifth of a ResNet-18 nvfp4 step was Nearest's
// loops, 2026-12-02).
inline std::uint32_t magnitude_bits(float v) {
  return recipe::f32_bits(v) & 0x7fffffffu;
}
inline float amax_of(std::uint32_t magnitude) {
  return magnitude > 0x7f800000u ? recipe::f32_nan() : recipe::f32_from_bits(magnitude);
}
inline std::uint32_t max_magnitude(const double* x, std::size_t n) {
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, magnitude_bits(float(x[i])));
  return m;
}
__attribute__((target("avx2"))) std::uint32_t max_magnitude_avx2(const double* x, std::size_t n) {
  return max_magnitude(x, n);
}

// NVFP4's stochastically rounded elements of a run (Nearest::values): entry
// i's value e2m1_stochastic_value(argument, bits[i], k). Whether an argument
// was NaN (those entries are the caller's). The AVX-512 loop converts between
// binary64 and 64-bit integers in vectors (AVX-512DQ); a first version
// with divisions and branches took 28 ns an entry on ResNet-18's gradients.
inline bool e2m1_stochastic_values(const float* __restrict v, const float* __restrict f,
                                   const std::uint64_t* __restrict bits, float* __restrict e, std::size_t n,
                                   int k) {
  int nan = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float a = recipe::stochastic_argument(ScaleFamily::nvfp4, f[i], v[i]);
    e[i] = recipe::e2m1_stochastic_value(a, bits[i], k);
    nan |= int(recipe::is_nan(a));
  }
  return nan != 0;
}
__attribute__((target("avx512f,avx512dq"))) bool e2m1_stochastic_values_avx512(const float* v, const float* f,
                                                                               const std::uint64_t* bits,
                                                                               float* e, std::size_t n,
                                                                               int k) {
  return e2m1_stochastic_values(v, f, bits, e, n, k);
}
bool e2m1_stochastic_values_best(const float* v, const float* f, const std::uint64_t* bits, float* e,
                                 std::size_t n, int k) {
  return cpu_features().avx512f && cpu_features().avx512dq
             ? e2m1_stochastic_values_avx512(v, f, bits, e, n, k)
             : e2m1_stochastic_values(v, f, bits, e, n, k);
}

// block_quantize_recipe's common cases, MX scales with FP8 elements and
// NVFP4, by blocks gathered as binary32: each block's
// scale is recipe::block_scale's (quantize_group_block's), each element's
// value `element(v, factor(scale))` (the value of its code, found without the
// code; the factor once a block), the statistics the same. The generic path
// spent most of a ResNet-18 mxfp8 or nvfp4 step in per-element calls
// (encode, then decode by table). `decode` is NVFP4's 1 / ges (1 for MX),
// which the statistics count in. The traversals below (lines, panels,
// tiles) differ only in the order they visit the blocks; each gathers a run
// of entries (a line, a panel's column, a tile), finds their values in one
// element_values call, then stores them.
// Rounded stochastically (`sr`: the gradients of NVFP4's recipe), each
// entry's value is instead the generic path's: stochastic_element's code,
// decoded by `code_value` (E2M1's found without the code by
// e2m1_stochastic_value, the same value), with the draw quantize_group_block gives entry k
// of group g (recipe_block.hpp: counter_random(seed, mix64(stream ^
// mix64(g)), k)), k counted row by row in the group as there. The generic
// path read each line across the columns and called two closures an entry:
// 14% of a ResNet-18 nvfp4 step (perf, 2026-12-02).
template <class Factor, class Element>
struct Nearest {
  const QuantSpec& spec;
  const recipe::Nvfp4TensorScale& ts;
  double decode;
  Factor factor;
  Element element;
  Matrix& out;
  Matrix* scales;
  Fp8Stats& s;
  const recipe::StochasticElements* sr = nullptr;
  const float* code_value = nullptr;  // (sr) each code's value
  double max = recipe::element_info(spec.element).max;
  std::vector<double> v = {};                  // a run's entries
  std::vector<float> vf = {}, f = {}, e = {};  // as binary32, their blocks' factors, their element values
  std::vector<std::uint64_t> bits = {};        // (sr) their draws
  double* out_data = out.data();               // out's entries (column-major, out.rows() a column)
  double* scale_data = scales ? scales->data() : nullptr;

  struct Block {
    double scale;  // the elements' decoding scale
    float f;       // factor(scale)
    double limit;  // |x| past it saturates: max * scale * decode
  };
  Block block(float amax) const {
    const recipe::BlockScale b = recipe::block_scale(spec, amax, ts);
    return {double(b.decode), factor(b), max * double(b.decode) * decode};
  }
  struct Counts {
    std::int64_t saturated = 0, flushed = 0;
  };
  void size_runs(std::size_t n) {
    v.resize(n);
    vf.resize(n);
    f.resize(n);
    e.resize(n);
    if (sr) bits.resize(n);
  }
  // (sr) counter_random(seed, group g's stream, k) is mix64(key(g) ^ k).
  std::uint64_t key(std::size_t group) const {
    return sr ? hd::mix64(sr->seed ^ hd::mix64(hd::mix64(sr->stream ^ hd::mix64(std::uint64_t(group))))) : 0;
  }
  void draw(std::size_t i, std::uint64_t group_key, std::size_t k) {
    if (sr) bits[i] = hd::mix64(group_key ^ std::uint64_t(k));
  }
  // Entry i of the run (x's value v[i], its element value e[i]) in block b,
  // stored at out's entry `at` (and its scale at scales', when kept), counted
  // in n; whether it is nonzero. The counts are the caller's locals, added to
  // s once a run (count): kept in s, whose int64 fields may alias out's
  // dimensions, they and out's data pointer were reloaded at every entry.
  bool put(std::size_t i, const Block& b, Eigen::Index at, Counts& n) {
    const double x = v[i], d = double(e[i]) * b.scale;
    n.saturated += std::isfinite(x) && std::fabs(x) > b.limit;
    n.flushed += x != 0 && d == 0;
    if (scale_data) scale_data[at] = b.scale;
    out_data[at] = d;
    return x != 0;
  }
  void count(const Counts& n) {
    s.saturated += n.saturated;
    s.flushed += n.flushed;
  }
  void values(std::size_t n) {
    if (!sr) return element_values_best(element, vf.data(), f.data(), e.data(), n);
    auto r = sr->rounding;
    // E2M1 by its own function (its value is stochastic_element's code's), in
    // a loop that vectorises; then a NaN, FP8 elements or an unusual draw
    // width by stochastic_element.
    const int k = r.stochastic_bits;
    const bool e2m1 =
        spec.family == ScaleFamily::nvfp4 && spec.element == recipe::ElementKind::e2m1 && k >= 1 && k <= 59;
    if (e2m1 && !e2m1_stochastic_values_best(vf.data(), f.data(), bits.data(), e.data(), n, k)) return;
    for (std::size_t i = 0; i < n; ++i) {
      const float a = recipe::stochastic_argument(spec.family, f[i], vf[i]);
      if (e2m1 && !recipe::is_nan(a)) continue;
      r.random_bits = bits[i];
      e[i] = code_value[recipe::stochastic_element(spec.element, sr->element, r, a)];
    }
  }
  // The scale range over blocks with a nonzero entry.
  void widen(bool nonzero, const Block& b) {
    if (nonzero && b.scale > 0 && std::isfinite(b.scale)) s.widen(1.0 / (b.scale * decode));
  }

  // Lines down x's columns (the rows of x^T), a whole line at a time.
  void lines(const Matrix& x, const recipe::OperandGroups& g) {
    size_runs(g.cols);
    std::vector<Block> b((g.cols + g.block - 1) / g.block);
    for (std::size_t row = 0; row < g.rows; ++row) {
      const std::uint64_t group = key(row);
      for (std::size_t c0 = 0, j = 0; c0 < g.cols; c0 += g.block, ++j) {
        const std::size_t n = std::min(g.block, g.cols - c0);
        std::uint32_t amax = 0;
        for (std::size_t k = c0; k < c0 + n; ++k) {
          v[k] = x(Eigen::Index(k), Eigen::Index(row));
          vf[k] = float(v[k]);
          amax = std::max(amax, magnitude_bits(vf[k]));
        }
        if (sr)
          for (std::size_t k = c0; k < c0 + n; ++k) draw(k, group, k);
        b[j] = block(amax_of(amax));
        std::fill(f.begin() + std::ptrdiff_t(c0), f.begin() + std::ptrdiff_t(c0 + n), b[j].f);
      }
      values(g.cols);
      const Eigen::Index column = Eigen::Index(row) * out.rows();  // the line is out's column `row`
      Counts n;
      for (std::size_t c0 = 0, j = 0; c0 < g.cols; c0 += g.block, ++j) {
        bool nonzero = false;
        for (std::size_t k = c0; k < std::min(c0 + g.block, g.cols); ++k)
          nonzero |= put(k, b[j], column + Eigen::Index(k), n);
        widen(nonzero, b[j]);
      }
      count(n);
    }
  }

  // Lines along x's rows (column-major: a line's entries are x.rows()
  // apart), by panels of one block's columns: every row's block amax down
  // the panel's columns, then every row's elements, each column read and
  // written in order. Reading a line across columns had spent three quarters
  // of the line path's time in cache misses (perf, 512 x 4608 NVFP4 operand,
  // 2026-11-30).
  void panels(const Matrix& x, const recipe::OperandGroups& g) {
    const Eigen::Index rows = Eigen::Index(g.rows);
    size_runs(g.rows);
    std::vector<std::uint32_t> amax(g.rows);
    std::vector<Block> b(g.rows);
    std::vector<char> nonzero(g.rows);
    std::vector<std::uint64_t> group(sr ? g.rows : 0);
    for (std::size_t r = 0; r < group.size(); ++r) group[r] = key(r);
    for (std::size_t c0 = 0; c0 < g.cols; c0 += g.block) {
      const Eigen::Index n = Eigen::Index(std::min(g.block, g.cols - c0)), c = Eigen::Index(c0);
      std::fill(amax.begin(), amax.end(), 0u);
      std::fill(nonzero.begin(), nonzero.end(), 0);
      for (Eigen::Index k = 0; k < n; ++k)
        for (Eigen::Index r = 0; r < rows; ++r)
          amax[std::size_t(r)] = std::max(amax[std::size_t(r)], magnitude_bits(float(x(r, c + k))));
      for (std::size_t r = 0; r < g.rows; ++r) {
        b[r] = block(amax_of(amax[r]));
        f[r] = b[r].f;
      }
      for (Eigen::Index k = 0; k < n; ++k) {
        for (Eigen::Index r = 0; r < rows; ++r) {
          v[std::size_t(r)] = x(r, c + k);
          vf[std::size_t(r)] = float(v[std::size_t(r)]);
        }
        if (sr)
          for (std::size_t r = 0; r < g.rows; ++r) draw(r, group[r], std::size_t(c + k));
        values(g.rows);
        const Eigen::Index column = (c + k) * out.rows();
        Counts counts;
        for (Eigen::Index r = 0; r < rows; ++r)
          nonzero[std::size_t(r)] |= put(std::size_t(r), b[std::size_t(r)], column + r, counts);
        count(counts);
      }
      for (std::size_t r = 0; r < g.rows; ++r) widen(nonzero[r] != 0, b[r]);
    }
  }

  // block x block tiles (one scale a tile: NVFP4's weights), tile by tile,
  // each tile's columns in order.
  void tiles(const Matrix& x, const recipe::OperandGroups& g) {
    const auto t = Eigen::Index(g.block), rows = Eigen::Index(g.rows), cols = Eigen::Index(g.cols);
    size_runs(std::size_t(t * t));
    for (Eigen::Index r0 = 0; r0 < rows; r0 += t)
      for (Eigen::Index c0 = 0; c0 < cols; c0 += t) {
        const Eigen::Index r1 = std::min(r0 + t, rows), c1 = std::min(c0 + t, cols);
        // (sr) tile (r0 / t, c0 / t) of a row-major grid; entry k row by row in it
        const std::uint64_t group = key(std::size_t(r0 / t * ((cols + t - 1) / t) + c0 / t));
        std::uint32_t amax = 0;
        std::size_t i = 0;
        for (Eigen::Index c = c0; c < c1; ++c)
          for (Eigen::Index r = r0; r < r1; ++r, ++i) {
            v[i] = x(r, c);
            vf[i] = float(v[i]);
            amax = std::max(amax, magnitude_bits(vf[i]));
            draw(i, group, std::size_t((r - r0) * (c1 - c0) + (c - c0)));
          }
        const Block b = block(amax_of(amax));
        std::fill(f.begin(), f.begin() + std::ptrdiff_t(i), b.f);
        values(i);
        bool nonzero = false;
        Counts counts;
        i = 0;
        for (Eigen::Index c = c0; c < c1; ++c)
          for (Eigen::Index r = r0; r < r1; ++r) nonzero |= put(i++, b, c * out.rows() + r, counts);
        count(counts);
        widen(nonzero, b);
      }
  }
};

// Tiles, lines down the columns (transposed) or lines along the rows.
template <class Factor, class Element>
void nearest(const Matrix& x, bool transposed, const QuantSpec& spec, const recipe::OperandGroups& g,
             const recipe::Nvfp4TensorScale& ts, double decode, Factor factor, Element element, Matrix& out,
             Matrix* scales, Fp8Stats& s, const recipe::StochasticElements* sr, const float* code_value) {
  Nearest<Factor, Element> q{spec, ts, decode, factor, element, out, scales, s, sr, code_value};
  if (g.tiles)
    q.tiles(x, g);
  else if (transposed)
    q.lines(x, g);
  else
    q.panels(x, g);
}

}  // namespace

// The whole tensor's amax (NVFP4's per-tensor scale, the statistics').
float tensor_amax_of(const Matrix& x) {
  const auto n = std::size_t(x.size());
  return amax_of(cpu_features().avx2 ? max_magnitude_avx2(x.data(), n) : max_magnitude(x.data(), n));
}

// The line (or tile) path's element, when there is one: MX's FP8 element
// (mx_element's scaled and clamped argument, fp8_nearest_value), NVFP4's
// (nvfp4_element's, e2m1_ladder_value); with `sr`, stochastic_element's
// (Nearest). False: the element-by-element path.
bool by_lines(const Matrix& x, bool transposed, const QuantSpec& spec, const recipe::OperandGroups& g,
              const recipe::Nvfp4TensorScale& ts, double decode, Matrix& out, Matrix* scales, Fp8Stats& s,
              const recipe::StochasticElements* sr, const float* code_value) {
  if (spec.family == ScaleFamily::mx && recipe::is_fp8(spec.element)) {
    const bool e5m2 = spec.element == recipe::ElementKind::e5m2;
    const bool clamp = spec.scale_rule != recipe::MxScaleRule::rceil;  // (mx_element's)
    const float max = recipe::element_info(spec.element).max;
    nearest(
        x, transposed, spec, g, ts, decode,
        [](const recipe::BlockScale& b) { return recipe::e8m0_reciprocal(b.code); },
        // (ints by value, selects: element_values vectorises it; captured bools did not)
        [max, clamp = int(clamp), e5m2 = int(e5m2)](float v, float reciprocal) {
          const float y = recipe::mul_f32(v, reciprocal), c = recipe::nan_clamp(y, -max, max);
          return recipe::fp8_nearest_value(clamp != 0 ? c : y, e5m2 != 0);
        },
        out, scales, s, sr, code_value);
    return true;
  }
  if (spec.family == ScaleFamily::nvfp4 && spec.element == recipe::ElementKind::e2m1) {
    nearest(
        x, transposed, spec, g, ts, decode, [](const recipe::BlockScale& b) { return b.encode; },
        [](float v, float encode) {
          return recipe::e2m1_ladder_value(recipe::nan_clamp(recipe::mul_f32(v, encode), -6.0f, 6.0f));
        },
        out, scales, s, sr, code_value);
    return true;
  }
  return false;
}

}  // namespace rpsim::sim::train::detail
