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

#include "block_lines.hpp"

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

thread_local bool elementwise_only = false;  // ScopedElementwiseBlockQuantiser

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
  const float tensor_amax = detail::tensor_amax_of(x);
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
  // Each code's value, decoded once a call instead of once an entry.
  float value[256];
  for (int code = 0; code < 256; ++code)
    value[code] = recipe::element_value(spec.element, std::uint8_t(code));
  if (!(!g.tiles && g.block > detail::kLineBlock) && !elementwise_only &&
      detail::by_lines(x, transposed, spec, g, ts, decode, out, scales, s, layout.sr ? &sr : nullptr,
                       value)) {
    s.entries = x.size();
    if (stats) add_stats(*stats, s);
    return out;
  }
  const double elem_max = recipe::element_info(spec.element).max;
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
