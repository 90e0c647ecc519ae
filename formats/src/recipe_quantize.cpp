// The block-quantiser mechanism (recipe.hpp): the tensor a recipe
// quantises (x, or x^T and its Hadamard transform), its tiles, each tile's
// amax, scale and elements. The arithmetic of one block is
// recipe_arith*.hpp; only the loops are here.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "recipe_internal.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/recipe.hpp"
#include "rpsim/formats/recipe_block.hpp"

namespace rpsim {

namespace {

using namespace recipe;
using detail::Tensor;
using detail::Tile;

const Format& element_format(ElementKind k) {
  if (k == ElementKind::int8)
    throw std::invalid_argument("stochastic rounding: MXINT8 elements are rounded to nearest only");
  return rpsim::format(element_name(k));
}

// v (already scaled as stochastic_argument scales it) rounded stochastically
// into the element format, saturating, as the element code; NaN keeps the
// format's NaN rule (E4M3 NaN, +0 for FP4 / FP6).
std::uint8_t stochastic_code(ElementKind k, float v, const ElementRounding& r, std::size_t i) {
  Rounding rounding;
  rounding.mode = RoundingMode::stochastic;
  rounding.random_bits = counter_random(r.seed, r.stream, i);
  return stochastic_element(k, element_format(k), rounding_desc(rounding), v);
}

bool stochastic(const ElementRounding* r) {
  return r && r->mode == RoundingMode::stochastic;
}

// One tile (MX, FP8 block or NVFP4 without 4over6): its scale from its amax
// (recipe_block.hpp, the CUDA backend's rule too), each element's code;
// stochastic rounding scales the element as the nearest path does.
void scaled_tile(const Tensor& t, const Tile& tile, const QuantSpec& s, const Nvfp4TensorScale& ts,
                 Quantized& q, const ElementRounding* r) {
  const BlockScale b = block_scale(s, detail::tile_amax(t, tile), ts);
  if (s.family != ScaleFamily::fp8) q.scale_codes.push_back(b.code);
  q.scales.push_back(b.decode);
  tile.each(t, [&](std::size_t i, float x) {
    q.codes[i] = stochastic(r) ? stochastic_code(s.element, stochastic_argument(s, b, x), *r, i)
                               : block_element(s, b, x);
  });
}

// NVFP4's per-tensor amax (or one per row), NaN if any entry is (torch.max).
std::vector<float> nvfp4_amax(const Tensor& t, bool per_row) {
  std::vector<float> amax(per_row ? t.rows : 1, 0.0f);
  for (std::size_t r = 0; r < t.rows; ++r)
    for (std::size_t c = 0; c < t.cols; ++c) {
      float& a = amax[per_row ? r : 0];
      a = nan_max(a, abs_f32(t.v[r * t.cols + c]));
    }
  return amax;
}

void check_spec(const QuantSpec& s) {
  if (s.tile_rows < 0 || s.tile_cols < 0)
    throw std::invalid_argument(
        fmt::format("quantize: tile {}x{} (sizes must be >= 0)", s.tile_rows, s.tile_cols));
  const bool fp8 = is_fp8(s.element);
  if (s.family == ScaleFamily::nvfp4 && s.element != ElementKind::e2m1)
    throw std::invalid_argument("quantize: NVFP4 quantises to e2m1 elements");
  if (s.family == ScaleFamily::fp8 && !fp8)
    throw std::invalid_argument("quantize: FP8 scaling quantises to e4m3 or e5m2 elements");
  if (s.family == ScaleFamily::nvfp4 && s.e4m3_max != 448 && s.e4m3_max != 256)
    throw std::invalid_argument(fmt::format("quantize: e4m3_max {} (448 or 256)", s.e4m3_max));
  if (s.four_over_six != FourOverSix::off && !(s.tile_cols == 16 && (s.tile_rows == 1 || s.tile_rows == 16)))
    throw std::invalid_argument("quantize: 4over6 takes 1x16 or 16x16 tiles");
  if ((s.rht || s.columnwise || s.row_scaled) && s.family != ScaleFamily::nvfp4)
    throw std::invalid_argument("quantize: columnwise, rht and row_scaled are NVFP4 options");
  if (s.row_scaled && s.tile_rows != 1)
    throw std::invalid_argument("quantize: row-scaled NVFP4 takes 1x16 blocks");
}

}  // namespace

Quantized quantize(const QuantSpec& spec, std::span<const float> x, std::size_t rows, std::size_t cols,
                   const ElementRounding* rounding, std::span<const float> amax) {
  check_spec(spec);
  if (x.size() != rows * cols)
    throw std::invalid_argument(fmt::format("quantize: {} values for a {}x{} tensor", x.size(), rows, cols));
  const Tensor t = detail::quantised_tensor(spec, x, rows, cols);
  Quantized q;
  q.spec = spec;
  q.rows = t.rows;
  q.cols = t.cols;
  q.codes.assign(t.rows * t.cols, 0);
  const std::size_t th = spec.tile_rows ? std::size_t(spec.tile_rows) : std::max<std::size_t>(t.rows, 1);
  const std::size_t tw = spec.tile_cols ? std::size_t(spec.tile_cols) : std::max<std::size_t>(t.cols, 1);
  q.scale_rows = (t.rows + th - 1) / th;
  q.scale_cols = (t.cols + tw - 1) / tw;
  std::vector<Nvfp4TensorScale> ts;
  if (spec.family == ScaleFamily::nvfp4) {
    q.amax = nvfp4_amax(t, spec.row_scaled);
    if (!amax.empty()) {
      if (amax.size() != q.amax.size())
        throw std::invalid_argument(
            fmt::format("quantize: {} amax values for {}", amax.size(), q.amax.size()));
      q.amax.assign(amax.begin(), amax.end());
    }
    const float e = spec.four_over_six == FourOverSix::off ? 448.0f : float(spec.e4m3_max);
    for (float a : q.amax) {
      ts.push_back(nvfp4_tensor_scale(a, e));
      q.tensor_encode.push_back(ts.back().encode);
    }
  }
  for (std::size_t i = 0; i < q.scale_rows; ++i)
    for (std::size_t j = 0; j < q.scale_cols; ++j) {
      const Tile tile{i * th, j * tw, th, tw};
      const Nvfp4TensorScale tensor = ts.empty() ? Nvfp4TensorScale{1.0f, 1.0f} : ts[spec.row_scaled ? i : 0];
      if (spec.family == ScaleFamily::nvfp4 && spec.four_over_six != FourOverSix::off) {
        if (stochastic(rounding)) throw std::invalid_argument("quantize: 4over6 rounds to nearest only");
        detail::four_over_six_tile(t, tile, spec, tensor, q.amax[spec.row_scaled ? i : 0], q);
      } else {
        scaled_tile(t, tile, spec, tensor, q, rounding);
      }
    }
  return q;
}

std::vector<double> dequantize(const Quantized& q) {
  const std::size_t th = q.scale_rows ? (q.rows + q.scale_rows - 1) / q.scale_rows : 1;
  const std::size_t tw = q.scale_cols ? (q.cols + q.scale_cols - 1) / q.scale_cols : 1;
  const std::size_t sth = q.spec.tile_rows ? std::size_t(q.spec.tile_rows) : th;
  const std::size_t stw = q.spec.tile_cols ? std::size_t(q.spec.tile_cols) : tw;
  const bool nv = q.spec.family == ScaleFamily::nvfp4;
  const float e = q.spec.four_over_six == FourOverSix::off ? 448.0f : float(q.spec.e4m3_max);
  std::vector<double> out(q.codes.size());
  for (std::size_t r = 0; r < q.rows; ++r)
    for (std::size_t c = 0; c < q.cols; ++c) {
      const std::size_t i = r * q.cols + c;
      const float s = q.scales[(r / sth) * q.scale_cols + c / stw];
      const float v = element_value(q.spec.element, q.codes[i]);
      if (!nv) {
        out[i] = mul_f32(v, s);  // in binary32, as torchao's to_dtype and TE's dequantize multiply
        continue;
      }
      const float amax = q.amax[q.spec.row_scaled ? r : 0];
      out[i] = div_f32(mul_f32(mul_f32(v, s), amax), mul_f32(6.0f, e));
    }
  return out;
}

}  // namespace rpsim
