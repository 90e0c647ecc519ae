// A GEMM operand under a block-scaled policy (block_gemm.hpp block_operand):
// the policy's recipe as a formats recipe row (recipe.hpp: torchao-mx with
// fp8.scale_rule, te-nvfp4 with fp8.nvfp4_formula, te-fp8-block with
// fp8.pow2_scales) run on each line or tile of the matrix, and the tensor's
// statistics. The same groups, stochastic-rounding keys and statistics as
// layers/fp8.cpp's block_quantize, which ran MX floor and NVFP4 only.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "rpsim/formats/random.hpp"
#include "rpsim/formats/recipe.hpp"
#include "rpsim/formats/recipe_block.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/layers/block_gemm.hpp"

namespace rpsim::sim::train {

namespace {

recipe::ElementKind element_kind(const Format& f, Fp8Scaling scaling) {
  for (int i = 0; i < 5; ++i) {  // the floating-point kinds (MXINT8 is no format row)
    const auto k = static_cast<recipe::ElementKind>(i);
    if (f == rpsim::format(element_name(k))) return k;
  }
  throw std::invalid_argument(fmt::format("{} quantises to {} elements, the op rule names {}",
                                          scaling == Fp8Scaling::nvfp4 ? "nvfp4" : "block scaling",
                                          scaling == Fp8Scaling::blockwise ? "e4m3 or e5m2" : "OCP MX",
                                          f.name));
}

// Adds one use's statistics to the tensor's record for the step.
void add_stats(Fp8Stats& into, const Fp8Stats& s) {
  into.amax = std::max(into.amax, s.amax);
  if (!std::isnan(s.scale_min)) {
    into.widen(s.scale_min);
    into.widen(s.scale_max);
  }
  into.entries += s.entries;
  into.saturated += s.saturated;
  into.flushed += s.flushed;
}

// Blocks of at most this many entries take nearest_by_lines (OCP MX: 32, NVFP4: 16).
constexpr std::size_t kLineBlock = 64;
thread_local bool elementwise_only = false;  // ScopedElementwiseBlockQuantiser

// Each entry's element value, entry k scaled by f[k]: a loop of selects (the
// shared element functions have no branches) that GCC vectorises, 8 lanes on
// AVX2 (with -fno-trapping-math: sim/CMakeLists.txt). On a Zen 2 core NVFP4's
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
void element_values_best(const Element& element, const float* v, const float* f, float* e, std::size_t n) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2)
    element_values_avx2(element, v, f, e, n);
  else
    element_values(element, v, f, e, n);
}

// block_quantize_recipe's common cases, MX scales with FP8 elements and
// NVFP4, rounded to nearest, by blocks gathered as binary32: each block's
// scale is recipe::block_scale's (quantize_group_block's), each element's
// value `element(v, factor(scale))` (the value of its code, found without the
// code; the factor once a block), the statistics the same. The generic path
// spent most of a ResNet-18 mxfp8 or nvfp4 step in per-element calls
// (encode, then decode by table). `decode` is NVFP4's 1 / ges (1 for MX),
// which the statistics count in. The traversals below (lines, panels,
// tiles) differ only in the order they visit the blocks; each gathers a run
// of entries (a line, a panel's column, a tile), finds their values in one
// element_values call, then stores them.
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
  double max = recipe::element_info(spec.element).max;
  std::vector<double> v = {};                  // a run's entries
  std::vector<float> vf = {}, f = {}, e = {};  // as binary32, their blocks' factors, their element values

  struct Block {
    double scale;  // the elements' decoding scale
    float f;       // factor(scale)
  };
  Block block(float amax) const {
    const recipe::BlockScale b = recipe::block_scale(spec, amax, ts);
    return {double(b.decode), factor(b)};
  }
  void size_runs(std::size_t n) {
    v.resize(n);
    vf.resize(n);
    f.resize(n);
    e.resize(n);
  }
  // Entry i of the run (x's value v[i], its element value e[i]), stored at
  // (r, c) in block b; whether it is nonzero.
  bool put(std::size_t i, const Block& b, Eigen::Index r, Eigen::Index c) {
    const double x = v[i], d = double(e[i]) * b.scale;
    s.saturated += std::isfinite(x) && std::fabs(x) > max * b.scale * decode;
    s.flushed += x != 0 && d == 0;
    if (scales) (*scales)(r, c) = b.scale;
    out(r, c) = d;
    return x != 0;
  }
  void values(std::size_t n) { element_values_best(element, vf.data(), f.data(), e.data(), n); }
  // The scale range over blocks with a nonzero entry.
  void widen(bool nonzero, const Block& b) {
    if (nonzero && b.scale > 0 && std::isfinite(b.scale)) s.widen(1.0 / (b.scale * decode));
  }

  // Lines down x's columns (the rows of x^T), a whole line at a time.
  void lines(const Matrix& x, const recipe::OperandGroups& g) {
    size_runs(g.cols);
    std::vector<Block> b((g.cols + g.block - 1) / g.block);
    for (std::size_t row = 0; row < g.rows; ++row) {
      for (std::size_t c0 = 0, j = 0; c0 < g.cols; c0 += g.block, ++j) {
        const std::size_t n = std::min(g.block, g.cols - c0);
        float amax = 0.0f;
        for (std::size_t k = c0; k < c0 + n; ++k) {
          v[k] = x(Eigen::Index(k), Eigen::Index(row));
          vf[k] = float(v[k]);
          amax = recipe::nan_max(amax, recipe::abs_f32(vf[k]));
        }
        b[j] = block(amax);
        std::fill(f.begin() + std::ptrdiff_t(c0), f.begin() + std::ptrdiff_t(c0 + n), b[j].f);
      }
      values(g.cols);
      for (std::size_t c0 = 0, j = 0; c0 < g.cols; c0 += g.block, ++j) {
        bool nonzero = false;
        for (std::size_t k = c0; k < std::min(c0 + g.block, g.cols); ++k)
          nonzero |= put(k, b[j], Eigen::Index(k), Eigen::Index(row));
        widen(nonzero, b[j]);
      }
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
    std::vector<float> amax(g.rows);
    std::vector<Block> b(g.rows);
    std::vector<char> nonzero(g.rows);
    for (std::size_t c0 = 0; c0 < g.cols; c0 += g.block) {
      const Eigen::Index n = Eigen::Index(std::min(g.block, g.cols - c0)), c = Eigen::Index(c0);
      std::fill(amax.begin(), amax.end(), 0.0f);
      std::fill(nonzero.begin(), nonzero.end(), 0);
      for (Eigen::Index k = 0; k < n; ++k)
        for (Eigen::Index r = 0; r < rows; ++r)
          amax[std::size_t(r)] = recipe::nan_max(amax[std::size_t(r)], recipe::abs_f32(float(x(r, c + k))));
      for (std::size_t r = 0; r < g.rows; ++r) {
        b[r] = block(amax[r]);
        f[r] = b[r].f;
      }
      for (Eigen::Index k = 0; k < n; ++k) {
        for (Eigen::Index r = 0; r < rows; ++r) {
          v[std::size_t(r)] = x(r, c + k);
          vf[std::size_t(r)] = float(v[std::size_t(r)]);
        }
        values(g.rows);
        for (Eigen::Index r = 0; r < rows; ++r)
          nonzero[std::size_t(r)] |= put(std::size_t(r), b[std::size_t(r)], r, c + k);
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
        float amax = 0.0f;
        std::size_t i = 0;
        for (Eigen::Index c = c0; c < c1; ++c)
          for (Eigen::Index r = r0; r < r1; ++r, ++i) {
            v[i] = x(r, c);
            vf[i] = float(v[i]);
            amax = recipe::nan_max(amax, recipe::abs_f32(vf[i]));
          }
        const Block b = block(amax);
        std::fill(f.begin(), f.begin() + std::ptrdiff_t(i), b.f);
        values(i);
        bool nonzero = false;
        i = 0;
        for (Eigen::Index c = c0; c < c1; ++c)
          for (Eigen::Index r = r0; r < r1; ++r) nonzero |= put(i++, b, r, c);
        widen(nonzero, b);
      }
  }
};

// Tiles, lines down the columns (transposed) or lines along the rows.
template <class Factor, class Element>
void nearest(const Matrix& x, bool transposed, const QuantSpec& spec, const recipe::OperandGroups& g,
             const recipe::Nvfp4TensorScale& ts, double decode, Factor factor, Element element, Matrix& out,
             Matrix* scales, Fp8Stats& s) {
  Nearest<Factor, Element> q{spec, ts, decode, factor, element, out, scales, s};
  if (g.tiles)
    q.tiles(x, g);
  else if (transposed)
    q.lines(x, g);
  else
    q.panels(x, g);
}

// The line (or tile) path's element, when there is one: MX's FP8 element
// (mx_element's scaled and clamped argument, fp8_nearest_value), NVFP4's
// (nvfp4_element's, e2m1_ladder_value). False: the element-by-element path.
bool by_lines(const Matrix& x, bool transposed, const QuantSpec& spec, const recipe::OperandGroups& g,
              const recipe::Nvfp4TensorScale& ts, double decode, Matrix& out, Matrix* scales, Fp8Stats& s) {
  if ((!g.tiles && g.block > kLineBlock) || elementwise_only) return false;
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
        out, scales, s);
    return true;
  }
  if (spec.family == ScaleFamily::nvfp4 && spec.element == recipe::ElementKind::e2m1) {
    nearest(
        x, transposed, spec, g, ts, decode, [](const recipe::BlockScale& b) { return b.encode; },
        [](float v, float encode) {
          return recipe::e2m1_ladder_value(recipe::nan_clamp(recipe::mul_f32(v, encode), -6.0f, 6.0f));
        },
        out, scales, s);
    return true;
  }
  return false;
}

}  // namespace

QuantSpec block_spec(const Fp8Recipe& recipe, const Format& f, std::size_t block) {
  QuantSpec s;
  s.element = element_kind(f, recipe.scaling);
  s.tile_rows = 1;
  s.tile_cols = static_cast<int>(block);
  if (recipe.scaling == Fp8Scaling::mx) {
    s.family = ScaleFamily::mx;
    s.scale_rule = recipe.scale_rule;
  } else if (recipe.scaling == Fp8Scaling::nvfp4) {
    if (s.element != recipe::ElementKind::e2m1)
      throw std::invalid_argument("nvfp4 quantises to e2m1 elements, the op rule names " + f.name);
    s.family = ScaleFamily::nvfp4;
    s.formula = recipe.nvfp4_formula;
  } else if (recipe.scaling == Fp8Scaling::blockwise) {
    if (!recipe::is_fp8(s.element)) element_kind(formats::binary32(), recipe.scaling);  // throws, naming it
    s.family = ScaleFamily::fp8;
    s.pow2_scales = recipe.pow2_scales;
    s.clamp = true;
  } else {
    throw std::invalid_argument("block_spec: the recipe does not block-scale");
  }
  return s;
}

QuantSpec gradient_spec(const PrecisionPolicy& p) {
  if (!block_scaled(p.fp8.scaling))
    throw ConfigError(
        fmt::format("policy '{}' does not block-scale (mxfp8 mxfp6 mxfp4 nvfp4 fp8-blockwise)", p.name));
  return block_spec(p.fp8, *p.rule("linear").backward_compute, std::size_t(p.fp8.block_size));
}

Matrix block_quantize_recipe(const Matrix& x, const Format& f, const Fp8Recipe& recipe,
                             const BlockLayout& layout, Fp8Stats* stats, double* tensor_scale, Matrix* scales,
                             double* amax_out) {
  const int block = recipe.block_size;
  // NVFP4's per-tensor FP32 scale comes from the whole tensor's amax
  // (TE's torch.max: NaN if any entry is, which makes every block's scale NaN).
  float tensor_amax = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i)
    tensor_amax = recipe::nan_max(tensor_amax, std::fabs(static_cast<float>(x.data()[i])));
  const bool nv = recipe.scaling == Fp8Scaling::nvfp4;
  if (amax_out) *amax_out = double(tensor_amax);
  const QuantSpec spec = block_spec(recipe, f, std::size_t(block));
  const recipe::Nvfp4TensorScale ts = recipe::nvfp4_tensor_scale(tensor_amax, 448.0f);
  // x ~ values / ges for NVFP4: the GEMM epilogue divides by ges (1 otherwise).
  const double decode = nv ? 1.0 / double(ts.encode) : 1.0;
  if (tensor_scale) *tensor_scale = nv ? double(ts.encode) : 1.0;
  // recipe_block.hpp's groups are rows (or tiles); lines down the columns
  // are the rows of x^T.
  const bool transposed = !layout.tiles && layout.axis == 0;
  recipe::OperandGroups g;
  g.rows = std::size_t(transposed ? x.cols() : x.rows());
  g.cols = std::size_t(transposed ? x.rows() : x.cols());
  g.block = std::size_t(block);
  g.tiles = layout.tiles;
  recipe::StochasticElements sr;
  if (layout.sr) {
    Rounding rounding;
    rounding.mode = RoundingMode::stochastic;
    sr.seed = layout.sr->seed;
    sr.stream = layout.sr->stream;
    sr.element = f;
    sr.rounding = rounding_desc(rounding);
  }
  auto at = [&](std::size_t r, std::size_t c) {
    return transposed ? x(Eigen::Index(c), Eigen::Index(r)) : x(Eigen::Index(r), Eigen::Index(c));
  };
  Matrix out(x.rows(), x.cols());
  if (scales) scales->resize(x.rows(), x.cols());
  Fp8Stats s;
  s.amax = tensor_amax;
  if (!layout.sr && by_lines(x, transposed, spec, g, ts, decode, out, scales, s)) {
    s.entries = x.size();
    if (stats) add_stats(*stats, s);
    return out;
  }
  const double elem_max = recipe::element_info(spec.element).max;
  // Each code's value, decoded once a call instead of once an entry.
  float value[256];
  for (int code = 0; code < 256; ++code)
    value[code] = recipe::element_value(spec.element, std::uint8_t(code));
  for (std::size_t gi = 0; gi < recipe::group_rows(g); ++gi)
    for (std::size_t gj = 0; gj < recipe::group_cols(g); ++gj)
      for (std::size_t j = 0; j < recipe::group_blocks(g); ++j) {
        bool nonzero = false;
        double scale = 1;
        recipe::quantize_group_block(
            spec, g, gi, gj, j, ts, layout.sr ? &sr : nullptr,
            [&](std::size_t r, std::size_t c) { return float(at(r, c)); },
            [&](std::size_t r, std::size_t c, std::uint8_t code, const recipe::BlockScale& b) {
              const double v = at(r, c);
              scale = double(b.decode);  // the block's decoding scale
              // Element times its block's scale: what the block-scaled MMA
              // multiplies (exact in binary64); the tensor scale is the epilogue's.
              const double d = double(value[code]) * scale;
              s.saturated += std::isfinite(v) && std::fabs(v) > elem_max * scale * decode;
              s.flushed += v != 0 && d == 0;
              nonzero |= v != 0;
              const Eigen::Index xr = Eigen::Index(transposed ? c : r), xc = Eigen::Index(transposed ? r : c);
              if (scales) (*scales)(xr, xc) = scale;
              out(xr, xc) = d;
            });
        // The scale range over blocks with a nonzero amax.
        if (nonzero && scale > 0 && std::isfinite(scale)) s.widen(1.0 / (scale * decode));
      }
  s.entries = x.size();
  if (stats) add_stats(*stats, s);
  return out;
}

ScopedElementwiseBlockQuantiser::ScopedElementwiseBlockQuantiser() : saved_(elementwise_only) {
  elementwise_only = true;
}
ScopedElementwiseBlockQuantiser::~ScopedElementwiseBlockQuantiser() {
  elementwise_only = saved_;
}

Matrix te_hadamard_transform(int n) {
  if (n != 16)
    throw std::invalid_argument(fmt::format("TE's Hadamard sign vector has 16 entries, not {}", n));
  // T = diag(signs) H16 / 4 applied to a column of 16: (T m)_k = sum_j
  // s_j H_jk m_j / 4, so T = (diag(s) H16)^T / 4 (TE's x_mat @ (H / 4) on
  // rows is this on columns).
  const auto signs = te_wgrad_sign_vector();
  Matrix t(n, n);
  for (int k = 0; k < n; ++k)
    for (int j = 0; j < n; ++j) t(k, j) = signs[j] * ((std::popcount(unsigned(j & k)) & 1) ? -0.25 : 0.25);
  return t;
}

}  // namespace rpsim::sim::train
