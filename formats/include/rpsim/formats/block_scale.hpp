// Block-scaled quantisation: OCP Microscaling (MX v1.0) and NVIDIA's NVFP4,
// as array functions. The quantised elements are returned as values of the
// element format (not scaled back) with one scale per block, so that
// value = element * scale; dequantise() multiplies them back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

// How the elements are rounded: nearest even (the specs' rule), or
// stochastically, as NVIDIA's NVFP4 recipe rounds gradients (arXiv
// 2509.25149, stochastic rounding: unbiased estimates of the gradient). The draw for
// element i is counter_random(seed, stream, i): the same key gives the same
// bits on every machine and thread count. The scales stay RNE in both modes.
struct ElementRounding {
  RoundingMode mode = RoundingMode::nearest_even;  // nearest_even or stochastic
  std::uint64_t seed = 0, stream = 0;
};

struct BlockQuantized {
  std::vector<double> elements;           // values of the element format, one per input
  std::vector<double> scales;             // one per block: the decoding scale (NaN: the block decodes to NaN)
  std::vector<std::uint8_t> scale_codes;  // the scales' encodings (E8M0 for MX, E4M3 for NVFP4)
  double tensor_scale = 1.0;              // NVFP4's per-tensor FP32 decode scale (1 for MX)
  std::size_t block = 0;
};

// OCP MX v1.0 Sec. 6.3 over consecutive blocks of `block` values (the last
// may be shorter): shared_exp = floor(log2(max |V_i|)) - emax of the element
// format, clamped to E8M0's [-127, 127] (an all-zero block takes -127);
// X = 2^shared_exp; P_i = V_i / X rounded to nearest even in the element
// format, normal values beyond its largest clamped to it (saturation, for
// every element format, e4m3 and e5m2 included). A block holding a NaN or an
// infinity gets the NaN scale (E8M0 0xFF) and decodes to NaN. Throws
// std::invalid_argument unless `element` is e4m3, e5m2, e3m2, e2m3 or e2m1
// and block >= 1.
BlockQuantized mx_quantize(const Format& element, std::span<const double> values, std::size_t block = 32,
                           const ElementRounding& rounding = {});

// NVFP4 (NVIDIA, "Pretraining Large Language Models with NVFP4", 2025,
// Sec. 2 and App. B; Transformer Engine's nvfp4 recipe): e2m1 elements in
// blocks of 16, an E4M3 scale per block under a per-tensor FP32 scale, all in
// binary32 arithmetic:
//   s_enc  = fp32(6 * 448 / amax(tensor))  (1 when amax is 0 or not finite)
//   code_b = e4m3(fp32(amax_b / 6) * s_enc), nearest even, saturating at 448
//   x_q    = e2m1(fp32(x * fp32(s_enc / code_b))), nearest even, saturating
// and x ~ x_q * code_b / s_enc (scales[b] = code_b, tensor_scale = 1/s_enc).
// A block whose scale code is 0 has all elements 0. tensor_amax: the amax the
// tensor scale comes from (rows of one tensor quantised one at a time); < 0:
// the amax of `values`.
BlockQuantized nvfp4_quantize(std::span<const double> values, std::size_t block = 16, double tensor_amax = -1,
                              const ElementRounding& rounding = {});

// element * scale of its block * tensor_scale for every value.
std::vector<double> dequantize(const BlockQuantized& q);

}  // namespace rpsim
