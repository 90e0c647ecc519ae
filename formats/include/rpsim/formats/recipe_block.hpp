// A block-scaled recipe's blocks (recipe.hpp's QuantSpec): a block's scale
// from its amax, each element's code (to nearest, or stochastically), and an
// operand's groups as the trainer quantises them. RPSIM_HD (host_device.hpp):
// recipe_quantize.cpp's tiles, the trainer's block_quantize_recipe and the
// CUDA backend's block quantiser (backend_block.cu) call these definitions;
// device-arith compares nvcc's copy with the host's. The arithmetic itself is
// recipe_arith_scales.hpp's; only the choice of rule per family is here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rpsim/formats/random.hpp"
#include "rpsim/formats/recipe.hpp"
#include "rpsim/formats/recipe_arith_scales.hpp"
#include "rpsim/formats/scalar_convert.hpp"

namespace rpsim::recipe {

// A block's scale: `decode`, what the block's elements are multiplied by (MX
// 2^k, NVFP4 the E4M3 scale, FP8 scale_inv); `encode`, what the elements are
// scaled by before their cast (NVFP4 and FP8; MX uses `code`); `code`, the
// scale's encoding (MX: E8M0, NVFP4: E4M3; FP8: none).
struct BlockScale {
  float decode = 1.0f, encode = 1.0f;
  std::uint8_t code = 0;
};
RPSIM_HD_ABI_BEGIN

// The scale of a block whose amax is `amax` (NaN if any entry is) under
// `spec`; `ts` is NVFP4's per-tensor scale (ignored by MX and FP8).
RPSIM_HD_INLINE BlockScale block_scale(const QuantSpec& spec, float amax, const Nvfp4TensorScale& ts) {
  BlockScale b;
  if (spec.family == ScaleFamily::mx) {
    b.code = mx_scale_code(amax, spec.scale_rule, element_info(spec.element));
    b.decode = e8m0_value(b.code);
  } else if (spec.family == ScaleFamily::fp8) {
    const Fp8Scale s = te_fp8_scale(amax, element_info(spec.element).max, spec.pow2_scales);
    b.encode = s.scale;
    b.decode = s.scale_inv;
  } else {
    b.code = e4m3fn_from_f32(nvfp4_scale_argument(amax, ts.encode, spec.formula));
    b.decode = element_value(ElementKind::e4m3, b.code);
    b.encode = nvfp4_encode_scale(b.decode, ts.decode);
  }
  return b;
}

// The code of element x of a block with scale `b`, rounded to nearest.
RPSIM_HD_INLINE std::uint8_t block_element(const QuantSpec& spec, const BlockScale& b, float x) {
  if (spec.family == ScaleFamily::mx) return mx_element(x, b.code, spec.scale_rule, spec.element);
  if (spec.family == ScaleFamily::fp8) return fp8_element(x, b.encode, spec.element, spec.clamp);
  return nvfp4_element(x, b.encode);
}

// What an element rounded stochastically is rounded from: x scaled as the
// nearest path scales it (MX by the E8M0 reciprocal, FP8 and NVFP4 by the
// encode scale; NVFP4 clamped to +-6 as its ladder is). The factor form is
// for callers that hold each block's factor instead of its BlockScale (the
// trainer's line path, block_lines.cpp).
RPSIM_HD_INLINE float stochastic_argument(ScaleFamily family, float factor, float x) {
  const float y = mul_f32(x, factor);
  return family == ScaleFamily::nvfp4 ? nan_clamp(y, -6.0f, 6.0f) : y;
}
RPSIM_HD_INLINE float stochastic_argument(const QuantSpec& spec, const BlockScale& b, float x) {
  return stochastic_argument(spec.family, spec.family == ScaleFamily::mx ? e8m0_reciprocal(b.code) : b.encode,
                             x);
}

// v rounded stochastically into element format `f` (k's descriptor) with
// rounding `r` (its random_bits drawn for this element), saturating (clamped
// to the largest finite first; NaN kept), as the element code.
RPSIM_HD_INLINE std::uint8_t stochastic_element(ElementKind k, const FormatDesc& f, const RoundingDesc& r,
                                                float v) {
  Flags flags = 0;
  const double max = hd::to_double(f, hd::max_finite_bits(f, false));
  const double clamped =
      is_nan(v) ? double(v) : (double(v) < -max ? -max : (double(v) > max ? max : double(v)));
  return encode_element(k, float(hd::to_double(f, hd::round_binary64(f, clamped, r, flags))));
}

RPSIM_HD_ABI_END

// ---- an operand's groups, as rpsim's trainer quantises a GEMM operand
// (sim/train block_operand.cpp): under tiles of 1 x b each row is one group
// (its blocks of b entries, the last one shorter); under b x b tiles each tile
// is one group sharing one scale, its entries read row by row. Group g (row
// major over the grid of groups) rounds stochastically with stream
// mix64(stream ^ mix64(g)), its k-th entry drawing counter_random(seed, that
// stream, k).
struct OperandGroups {
  std::size_t rows = 0, cols = 0, block = 32;
  bool tiles = false;
};

// The stochastic rounding of an operand's elements: the seed and stream of
// the whole operand, the element format's descriptor and the rounding's
// other fields.
struct StochasticElements {
  std::uint64_t seed = 0, stream = 0;
  FormatDesc element;
  RoundingDesc rounding;
};
RPSIM_HD_ABI_BEGIN

RPSIM_HD_INLINE std::size_t group_rows(const OperandGroups& g) {
  return g.tiles ? (g.rows + g.block - 1) / g.block : g.rows;
}
RPSIM_HD_INLINE std::size_t group_cols(const OperandGroups& g) {
  return g.tiles ? (g.cols + g.block - 1) / g.block : 1;
}
// The blocks (scales) of one group: a tile has one.
RPSIM_HD_INLINE std::size_t group_blocks(const OperandGroups& g) {
  return g.tiles ? 1 : (g.cols + g.block - 1) / g.block;
}

// Block j of group (gi, gj): its amax, scale and elements. x(r, c) reads the
// operand as binary32; out(r, c, code, scale) takes each element. `sr` NULL:
// to nearest.
template <class X, class Out>
RPSIM_HD_INLINE void quantize_group_block(const QuantSpec& spec, const OperandGroups& g, std::size_t gi,
                                          std::size_t gj, std::size_t j, const Nvfp4TensorScale& ts,
                                          const StochasticElements* sr, X x, Out out) {
  // Entry k of the group at (r0 + k / width, c0 + k % width).
  const std::size_t r0 = g.tiles ? gi * g.block : gi, c0 = g.tiles ? gj * g.block : 0;
  const std::size_t height = g.tiles ? (g.rows - r0 < g.block ? g.rows - r0 : g.block) : 1;
  const std::size_t width = g.tiles ? (g.cols - c0 < g.block ? g.cols - c0 : g.block) : g.cols;
  const std::size_t k0 = g.tiles ? 0 : j * g.block;
  const std::size_t k1 = g.tiles ? height * width : (k0 + g.block < width ? k0 + g.block : width);
  if (k0 >= k1) return;  // no entries (and width may be 0)
  // Entry k0's place, then each next one's by a step: no division an entry
  // (two per entry before; with block_operand.cpp's decode table, 28% off a
  // ResNet-18 mxfp8 step on the host).
  const std::size_t row0 = r0 + k0 / width, col0 = c0 + k0 % width, col_end = c0 + width;
  float amax = 0.0f;
  for (std::size_t k = k0, row = row0, col = col0; k < k1; ++k) {
    amax = nan_max(amax, abs_f32(x(row, col)));
    if (++col == col_end) col = c0, ++row;
  }
  const BlockScale b = block_scale(spec, amax, ts);
  RoundingDesc r;
  std::uint64_t stream = 0;
  if (sr) {
    r = sr->rounding;
    stream = hd::mix64(sr->stream ^ hd::mix64(std::uint64_t(gi * group_cols(g) + gj)));
  }
  for (std::size_t k = k0, row = row0, col = col0; k < k1; ++k) {
    const float v = x(row, col);
    std::uint8_t code;
    if (sr) {
      r.random_bits = hd::counter_random(sr->seed, stream, k);
      code = stochastic_element(spec.element, sr->element, r, stochastic_argument(spec, b, v));
    } else {
      code = block_element(spec, b, v);
    }
    out(row, col, code, b);
    if (++col == col_end) col = c0, ++row;
  }
}

RPSIM_HD_ABI_END
}  // namespace rpsim::recipe
