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

#include "rpsim/formats/random.hpp"
#include "rpsim/formats/recipe.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/layers/block_gemm.hpp"

namespace rpsim::sim::train {

namespace {

recipe::ElementKind element_kind(const Format& f, Fp8Scaling scaling) {
  const char* names[] = {"e4m3", "e5m2", "e3m2", "e2m3", "e2m1"};
  for (int i = 0; i < 5; ++i)
    if (f == rpsim::format(names[i])) return static_cast<recipe::ElementKind>(i);
  throw std::invalid_argument(fmt::format("{} quantises to {} elements, the op rule names {}",
                                          scaling == Fp8Scaling::nvfp4 ? "nvfp4" : "block scaling",
                                          scaling == Fp8Scaling::blockwise ? "e4m3 or e5m2" : "OCP MX",
                                          f.name));
}

// The group (a line, or a tile read row by row) of (gi, gj): f(row, col).
template <class F>
void each(const Matrix& x, const BlockLayout& layout, int block, Eigen::Index gi, Eigen::Index gj, F f) {
  const bool tiles = layout.tiles;
  const Eigen::Index r0 = tiles ? gi * block : layout.axis == 1 ? gi : 0;
  const Eigen::Index c0 = tiles ? gj * block : layout.axis == 1 ? 0 : gj;
  const Eigen::Index r1 = tiles              ? std::min<Eigen::Index>(x.rows(), r0 + block)
                          : layout.axis == 1 ? r0 + 1
                                             : x.rows();
  const Eigen::Index c1 = tiles              ? std::min<Eigen::Index>(x.cols(), c0 + block)
                          : layout.axis == 1 ? x.cols()
                                             : c0 + 1;
  for (Eigen::Index r = r0; r < r1; ++r)
    for (Eigen::Index c = c0; c < c1; ++c) f(r, c);
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
  const Eigen::Index rows = layout.tiles ? (x.rows() + block - 1) / block : layout.axis == 1 ? x.rows() : 1;
  const Eigen::Index cols = layout.tiles ? (x.cols() + block - 1) / block : layout.axis == 1 ? 1 : x.cols();
  // NVFP4's per-tensor FP32 scale comes from the whole tensor's amax
  // (TE's torch.max: NaN if any entry is, which makes every block's scale NaN).
  float tensor_amax = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i)
    tensor_amax = recipe::nan_max(tensor_amax, std::fabs(static_cast<float>(x.data()[i])));
  const bool nv = recipe.scaling == Fp8Scaling::nvfp4;
  if (amax_out) *amax_out = double(tensor_amax);
  Matrix out(x.rows(), x.cols());
  if (scales) scales->resize(x.rows(), x.cols());
  Fp8Stats s;
  s.amax = tensor_amax;
  std::vector<float> v;
  for (Eigen::Index gi = 0; gi < rows; ++gi)
    for (Eigen::Index gj = 0; gj < cols; ++gj) {
      v.clear();
      each(x, layout, block, gi, gj, [&](Eigen::Index r, Eigen::Index c) { v.push_back(float(x(r, c))); });
      // A tile shares one scale; a line has one per `block` entries.
      const std::size_t b = layout.tiles ? v.size() : std::size_t(block);
      ElementRounding er;
      if (layout.sr) {
        er.mode = RoundingMode::stochastic;
        er.seed = layout.sr->seed;
        er.stream = mix64(layout.sr->stream ^ mix64(std::uint64_t(gi * cols + gj)));
      }
      const Quantized q = quantize(block_spec(recipe, f, b), v, 1, v.size(), &er,
                                   nv ? std::span<const float>(&tensor_amax, 1) : std::span<const float>());
      // x ~ values / ges for NVFP4: the GEMM epilogue divides by ges (1 otherwise).
      const double decode = nv ? 1.0 / double(q.tensor_encode.at(0)) : 1.0;
      if (tensor_scale) *tensor_scale = nv ? double(q.tensor_encode.at(0)) : 1.0;
      std::vector<char> nonzero(q.scales.size(), 0);
      std::size_t k = 0;
      each(x, layout, block, gi, gj, [&](Eigen::Index r, Eigen::Index c) {
        const double scale = q.scales[k / b];  // the block's decoding scale
        // Element times its block's scale: what the block-scaled MMA
        // multiplies (exact in binary64); the tensor scale is the epilogue's.
        const double d = double(recipe::element_value(q.spec.element, q.codes[k])) * scale;
        const double elem_max = recipe::element_info(q.spec.element).max;
        s.saturated += std::isfinite(x(r, c)) && std::fabs(x(r, c)) > elem_max * scale * decode;
        s.flushed += x(r, c) != 0 && d == 0;
        nonzero[k / b] |= x(r, c) != 0;
        if (scales) (*scales)(r, c) = scale;
        out(r, c) = d;
        ++k;
      });
      // The scale range over blocks with a nonzero amax.
      for (std::size_t i = 0; i < q.scales.size(); ++i)
        if (nonzero[i] && q.scales[i] > 0 && std::isfinite(q.scales[i]))
          s.widen(1.0 / (q.scales[i] * decode));
    }
  s.entries = x.size();
  if (stats) add_stats(*stats, s);
  return out;
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
