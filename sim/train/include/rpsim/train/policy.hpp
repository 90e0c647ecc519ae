// Precision policies: which format each op computes and outputs in, how its
// matmuls accumulate, and where weights, gradients and optimizer state live.
// The per-op rules start from each op's autocast class in the op table
// (ops.hpp: allow list to the low format, deny list to binary32, everything
// else follows its inputs), written as data so a config can edit them.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/recipe_arith_scales.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/scaling/fp8_scaling.hpp"
#include "rpsim/train/ops.hpp"
#include "rpsim/train/tensor.hpp"

namespace rpsim::sim::train {

// FP8 tensor scaling (Micikevicius et al. 2022; NVIDIA Transformer Engine's
// DelayedScaling recipe) and block scaling of the matmul inputs: OCP MX v1.0
// (E8M0 scale per block), NVFP4 (E4M3 scale per block under a per-tensor
// FP32 scale; NVIDIA, arXiv 2509.25149) and FP8 block scaling (DeepSeek-V3;
// TE's Float8BlockScaling: a binary32 scale per 1x128 block or 128x128
// tile). The quantisers are formats' recipe rows (recipe.hpp): torchao-mx,
// te-nvfp4, te-fp8-block. The element formats are the op rule's compute
// (forward) and backward_compute (gradient) formats.
enum class Fp8Scaling { none, delayed, current, mx, nvfp4, blockwise };
struct Fp8Recipe {
  Fp8Scaling scaling = Fp8Scaling::none;
  int amax_history_len = 16;
  sim::AmaxComputeAlgo amax_compute_algo = sim::AmaxComputeAlgo::max;
  int margin = 0;       // scale = fp8_max / amax / 2^margin
  int block_size = 32;  // elements sharing one block scale (mx, nvfp4)
  // The rest apply to the block-scaled recipes only.
  // Weights in block_size x block_size tiles, so W and W^T quantise to the
  // same values in forward and in the input-gradient GEMM (2509.25149, "2D scaling").
  bool weight_2d = false;
  // Random Hadamard transform of this size on the weight-gradient GEMM's two
  // inputs along K (tokens), 0 = off (2509.25149,
  // "Random Hadamard transforms": 16x16, a random sign vector).
  int hadamard = 0;
  // The transform's sign vector: Transformer Engine's fixed one (te, the
  // default: the wgrad sign vector of TE's nvfp4 recipe, 16 entries), or one
  // drawn from the run's seed (random: 2509.25149's description).
  enum class HadamardSigns : std::uint8_t { te, random };
  HadamardSigns hadamard_signs = HadamardSigns::te;
  // Output gradients (dy) quantised with stochastic rounding (2509.25149:
  // unbiased gradients).
  bool gradient_sr = false;
  // The last N block-scaled linear layers of the model run in bfloat16
  // instead (2509.25149: selective high-precision
  // layers, the last blocks kept in BF16).
  int high_precision_last = 0;
  // mx: the E8M0 scale rule (torchao ScaleCalculationMode; floor is OCP MX's).
  recipe::MxScaleRule scale_rule = recipe::MxScaleRule::floor;
  // nvfp4: TE's block decode-scale formula (te-2026-03, or te-2026-02 before TE 523801d).
  recipe::Nvfp4Formula nvfp4_formula = recipe::Nvfp4Formula::te_2026_03;
  // blockwise: scales rounded down to powers of two (TE Float8BlockScaling's default).
  bool pow2_scales = true;
};
inline bool block_scaled(Fp8Scaling s) {
  return s == Fp8Scaling::mx || s == Fp8Scaling::nvfp4 || s == Fp8Scaling::blockwise;
}

struct OpRule {
  bool follow_inputs = false;  // compute and output in the input's format
  const Format* compute = nullptr;
  const Format* output = nullptr;
  // Inputs of the backward matmuls (FP8 recipes use e5m2 for gradients).
  const Format* backward_compute = nullptr;
  // How its matmuls accumulate (forward and both backward matmuls): any of
  // sim's models; the bias add and the bias-gradient sum run in its output
  // format.
  sim::AccumulationModel accumulation;
  // FP8 per-tensor or block scaling of the matmul inputs.
  bool scaled_inputs = false;
};

struct PrecisionPolicy {
  std::string name;  // as meta.json shows it: the row's, "+custom" after a config's overrides
  std::string base;  // the policy-table row it starts from
  std::map<std::string, OpRule> ops;
  std::vector<std::string> autocast_allow, autocast_deny;  // as configured (for meta.json)
  const Format* autocast_format = nullptr;                 // null: autocast off
  const Format* data = nullptr;                            // format of the input batch
  const Format* weights = nullptr;                         // the copy the ops read (autocast: cast copies)
  const Format* master_weights = nullptr;  // null: no master copy, weights are updated in place
  const Format* gradients = nullptr;       // stored weight gradients
  const Format* optimizer_state = nullptr;
  const Format* optimizer_compute = nullptr;  // the optimizer's arithmetic (PyTorch "opmath")
  // Every rounding of the forward and backward passes (op outputs,
  // gradients, casts): "sr" rounds them stochastically, as Gupta et al.
  // 2015's fixed-point training does; update_rounding is the weight store's.
  RoundingMode rounding = RoundingMode::nearest_even;
  RoundingMode update_rounding = RoundingMode::nearest_even;
  bool kahan = false;  // compensated weight updates (Zamirai et al. 2020)
  Fp8Recipe fp8;
  std::string default_loss_scaler = "none";

  const OpRule& rule(const std::string& op) const;
  // The format the updated parameter values are stored in.
  const Format& parameter_storage() const { return master_weights ? *master_weights : *weights; }
  nlohmann::json to_json() const;
};

// The named policies, one row each (policy.cpp): fp32 fp64 fp16-amp bf16-amp
// fp16-pure bf16-pure bf16-kahan fp8 fp8-delayed fp8-current fp8-mx mxfp8
// mxfp6 mxfp4 nvfp4 fp8-blockwise.
struct PolicyInfo {
  std::string name;
  std::string description;
  PrecisionPolicy (*make)(const std::string& name);
};
std::span<const PolicyInfo> policies();
// Throws ConfigError naming it and listing the table's names.
PrecisionPolicy named_policy(const std::string& name);
const std::vector<std::string>& policy_names();

// The names of the FP8 scalings in configs and meta.json, one row each.
struct Fp8ScalingName {
  Fp8Scaling scaling;
  const char* name;
};
std::span<const Fp8ScalingName> fp8_scaling_names();
// The names configs give the recipe options: floor rceil ceil even;
// te-2026-03 te-2026-02.
const char* mx_scale_rule_name(recipe::MxScaleRule r);
const char* nvfp4_formula_name(recipe::Nvfp4Formula f);
const char* hadamard_signs_name(Fp8Recipe::HadamardSigns s);
// A policy read from a config: policy_from_json in the config layer (sim/config).

}  // namespace rpsim::sim::train
