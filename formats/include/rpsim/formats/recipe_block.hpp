// One block of a block-scaled recipe (recipe.hpp's QuantSpec), elements
// rounded to nearest: its scale from its amax, each element's code, and a run
// of blocks along a line. RPSIM_HD (host_device.hpp): recipe_quantize.cpp's
// tile loops and the CUDA backend's block quantiser (backend_block.cu) call
// these same definitions; device-arith compares nvcc's copy with the host's.
// The arithmetic itself is recipe_arith_scales.hpp's; only the choice of rule
// per family is here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rpsim/formats/recipe.hpp"
#include "rpsim/formats/recipe_arith_scales.hpp"

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

// A line of n binary32 values x(i) in blocks of `block` (the last one may be
// shorter): for each block j, on_scale(j, its BlockScale); for each element,
// on_code(i, its code, its block's BlockScale). The amax of a block is
// torch.amax's (a NaN entry makes it NaN).
template <class X, class OnScale, class OnCode>
RPSIM_HD_INLINE void quantize_line(const QuantSpec& spec, std::size_t n, std::size_t block,
                                   const Nvfp4TensorScale& ts, X x, OnScale on_scale, OnCode on_code) {
  for (std::size_t j0 = 0, j = 0; j0 < n; j0 += block, ++j) {
    const std::size_t j1 = j0 + block < n ? j0 + block : n;
    float amax = 0.0f;
    for (std::size_t i = j0; i < j1; ++i) amax = nan_max(amax, abs_f32(x(i)));
    const BlockScale b = block_scale(spec, amax, ts);
    on_scale(j, b);
    for (std::size_t i = j0; i < j1; ++i) on_code(i, block_element(spec, b, x(i)), b);
  }
}

RPSIM_HD_ABI_END
}  // namespace rpsim::recipe
