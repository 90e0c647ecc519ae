// Block-scaled quantisation: OCP Microscaling (MX v1.0) and NVIDIA's NVFP4,
// as array functions over binary64 values (the trainer's and rpsim.torch's
// entry points). Both run the recipe mechanism (recipe.hpp) on the values
// read as binary32, as the references read them (exact for binary32 values).
// The quantised elements are returned as values of the element format (not
// scaled back) with one scale per block, so that value = element * scale;
// dequantise() multiplies them back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/recipe.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

struct BlockQuantized {
  std::vector<double> elements;           // values of the element format, one per input
  std::vector<double> scales;             // one per block: the decoding scale (NaN: the block decodes to NaN)
  std::vector<std::uint8_t> scale_codes;  // the scales' encodings (E8M0 for MX, E4M3 for NVFP4)
  double tensor_scale = 1.0;              // NVFP4's per-tensor FP32 decode scale (1 for MX)
  std::size_t block = 0;
};

// OCP MX v1.0 Sec. 6.3 over consecutive blocks of `block` values (the last
// may be shorter): the ocp-mx recipe row (torchao's FLOOR rule):
// shared_exp = floor(log2(max |V_i|)) - emax of the element format, clamped
// to E8M0's [-127, 127] (an all-zero block takes -127); X = 2^shared_exp;
// P_i = fp32(V_i / X) rounded to nearest even in the element format, normal
// values beyond its largest clamped to it (saturation, for every element
// format, e4m3 and e5m2 included). A block holding a NaN or an infinity gets
// the NaN scale (E8M0 0xFF) and decodes to NaN. Throws std::invalid_argument
// unless `element` is e4m3, e5m2, e3m2, e2m3 or e2m1 and block >= 1.
BlockQuantized mx_quantize(const Format& element, std::span<const double> values, std::size_t block = 32,
                           const ElementRounding& rounding = {});

// NVFP4 as Transformer Engine's reference computes it (the te-nvfp4 recipe
// row, formula te-2026-03; NVIDIA, "Pretraining Large Language Models with
// NVFP4", arXiv 2509.25149): e2m1 elements in blocks of `block`, an E4M3
// scale per block under a per-tensor binary32 scale, in binary32:
//   ges    = min(fp32(2688 / amax(tensor)), FLT_MAX), 1 where that is 0
//   code_b = e4m3(min(fp32(amax_b * fp32(ges * fp32(1/6))), 448)), nearest even
//   x_q    = TE's E2M1 ladder of clamp(fp32(x * enc_b), -6, 6), nearest even,
//            enc_b = min(fp32(1 / fp32(code_b * fp32(1 / ges))), FLT_MAX)
// and x ~ x_q * code_b / ges (scales[b] = code_b, tensor_scale = 1 / ges). A
// NaN in a block makes its scale NaN (with a NaN tensor amax, every block's).
// tensor_amax: the amax the tensor scale comes from (rows of one tensor
// quantised one at a time); < 0: the amax of `values`.
BlockQuantized nvfp4_quantize(std::span<const double> values, std::size_t block = 16, double tensor_amax = -1,
                              const ElementRounding& rounding = {});

// element * scale of its block * tensor_scale for every value.
std::vector<double> dequantize(const BlockQuantized& q);

}  // namespace rpsim
