// Scaling factors for FP8 and MX tensors, computed as NVIDIA Transformer
// Engine (TE) and the OCP Microscaling spec compute them. This file only
// computes scales; the trainer multiplies by them and rounds (quantized =
// round_to_fp8(x * scale), dequantized = quantized * scale_inv).
//
// All arithmetic is binary32, as in TE's kernels, so scales match bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "rpsim/formats/format.hpp"

namespace rpsim::sim {

// ---------------------------------------------------------------------------
// Delayed scaling: transformer_engine/common/recipe/__init__.py DelayedScaling
// (margin=0, amax_history_len=1024, amax_compute_algo="max") and
// transformer_engine/common/recipe/delayed_scaling.cu (amax_and_scale_update
// kernel and kernel_bulk).

enum class AmaxComputeAlgo { max, most_recent };
// TE's recipe spells them "max" and "most_recent"; an unknown name is nullopt.
std::string_view amax_compute_algo_name(AmaxComputeAlgo algo);
std::optional<AmaxComputeAlgo> parse_amax_compute_algo(std::string_view name);

struct DelayedScalingConfig {
  float fp8_max = 448.0f;  // fp8_dtype_max: 448 for E4M3, 57344 for E5M2
  int margin = 0;          // scaled_max = fp8_max * 2^-margin
  std::size_t amax_history_len = 1024;
  AmaxComputeAlgo amax_compute_algo = AmaxComputeAlgo::max;
  // TE's PyTorch path (fused_amax_and_scale_update_after_reduction ->
  // kernel_bulk) neither rolls the history nor recomputes the scale when the
  // step's amax is 0 ("if (last_amax != 0.0f)"); the per-tensor `kernel`
  // rolls regardless. true = kernel_bulk.
  bool skip_update_on_zero_amax = true;
};

// One tensor's delayed-scaling state (TE keeps a column of amax_history, one
// scale and one scale_inv per FP8 tensor). Starts at scale 1, history zeros.
class DelayedScaling {
 public:
  explicit DelayedScaling(const DelayedScalingConfig& config = {});

  // The quantizing kernel's amax reduction: history[0] = fmaxf(history[0], amax)
  // (fmaxf ignores a NaN operand, as TE's amax reduction does; see amax_of).
  void record_amax(float amax);

  // amax_and_scale_update, once per step after the amaxes are recorded:
  //   last = history[0]
  //   roll: history <- [0, history[2], ..., history[len-1], last] (the oldest,
  //         history[1], drops out; position 0 is cleared for the next step)
  //   amax = max over the pre-roll history (max) or last (most_recent)
  //   scale = (isfinite(amax) && amax > 0) ? scaled_max / amax : previous scale
  //   if isinf(scale): scale = FLT_MAX;  scale_inv = 1 / scale
  void update();

  float scale() const { return scale_; }
  float scale_inv() const { return scale_inv_; }
  // history()[0] is the amax being recorded this step; [1] the oldest kept.
  const std::vector<float>& history() const { return history_; }
  const DelayedScalingConfig& config() const { return config_; }

 private:
  DelayedScalingConfig config_;
  float scaled_max_;
  std::vector<float> history_;
  float scale_ = 1.0f;
  float scale_inv_ = 1.0f;
};

// amax of a tensor as TE's cast kernels reduce it: fmaxf(amax, fabsf(x)),
// which skips NaN elements and keeps inf.
float amax_of(std::span<const float> values);

// ---------------------------------------------------------------------------
// Current (per-tensor, just-in-time) scaling: TE Float8CurrentScaling,
// transformer_engine/common/recipe/recipe_common.cuh compute_scale_from_amax:
//   if amax < epsilon: amax = epsilon
//   if amax is inf, 0 or NaN: return 1
//   scale = fp8_max / amax (round to nearest); if isinf(scale): scale = value_for_inf
//   if force_pow_2_scales: keep sign and exponent bits only (round down to 2^k)
struct CurrentScalingConfig {
  float fp8_max = 448.0f;
  bool force_pow_2_scales = false;                    // QParams.power_2_scale
  float amax_epsilon = 0.0f;                          // QParams.amax_epsilon
  float value_for_inf = 3.40282346638528859812e+38f;  // FLT_MAX (max finite of the fp32 input)
};
float current_scale_from_amax(float amax, const CurrentScalingConfig& config = {});

// ---------------------------------------------------------------------------
// MX block scaling: one E8M0 scale per block of 32 elements (OCP Microscaling
// Formats (MX) v1.0). Scales are returned as E8M0 codes: value 2^(code - 127),
// 0xFF = NaN, matching rpsim::format("e8m0").
inline constexpr std::size_t kMxBlockSize = 32;

enum class MxScaleRule {
  // OCP MX v1.0 section 6.3: X = 2^(floor(log2(amax)) - emax_elem), emax_elem
  // the element format's largest exponent (E4M3 8, E5M2 15, E2M1 2, ...);
  // clamped to 2^-127 below, NaN above 2^127 (microxcaling's _quantize_mx);
  // amax 0 gives 2^-127. Elements may then exceed the element max and are
  // clamped when rounded.
  ocp_floor,
  // Transformer Engine MXFP8: float_to_e8m0(amax * max_norm_rcp), with
  // max_norm_rcp = float(1 / elem_max): rounds the exponent UP, so
  // amax / X <= elem_max and nothing saturates. NaN -> 0xFF, inf -> 0xFE,
  // 0 -> 0x00; a result of 2^128 saturates to 0xFE.
  te_round_up,
};

std::uint8_t mx_scale_code(float block_amax, const Format& element, MxScaleRule rule);

// One code per block of `block_size` consecutive values (the last block may
// be shorter); block amax as amax_of.
std::vector<std::uint8_t> mx_block_scale_codes(std::span<const float> values, const Format& element,
                                               MxScaleRule rule, std::size_t block_size = kMxBlockSize);

// 2^(code - 127) as a float (code 0 is 2^-127, a binary32 subnormal); NaN for 0xFF.
float e8m0_to_float(std::uint8_t code);

}  // namespace rpsim::sim
