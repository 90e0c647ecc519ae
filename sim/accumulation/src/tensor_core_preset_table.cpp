// The rows of the Tensor Core presets (tensor_core_presets.hpp): one row per
// GPU and one per datapath, each citing where its numbers come from. "KM25"
// is Khattak & Mikaitis, "Accurate Models of NVIDIA Tensor Cores", ACM TACO
// 2025, with its public MATLAB models (north-numerical-computing/
// MATLAB-tensor-core, models/*TC.m); "FHMP21" is Fasi, Higham, Mikaitis &
// Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ Comput. Sci.
// 2021; "MMA-Sim" is Xie et al., arXiv 2511.10909 (microsoft/MMA-Sim commit
// c785138, validated by its authors bitwise against real GPUs). "golden"
// marks a row checked bit for bit against the measured vectors in
// shared/tc-golden, "stress" against shared/tc-stress, "mma-sim" against
// shared/mma-sim (tests/sim/validation).
#include "rpsim/accumulation/tensor_core_presets.hpp"

#include <iterator>
#include <vector>

#include "tensor_core_preset_table.hpp"

namespace rpsim::sim {

namespace {

constexpr auto RTZ = RoundingMode::toward_zero;
constexpr auto RNE = RoundingMode::nearest_even;
constexpr auto aligned = CJoin::aligned_with_products;
constexpr int none = kNoAlignmentFloor;
constexpr std::uint8_t mma = tc_mma_sync, both = tc_mma_sync | tc_wgmma;
constexpr std::uint8_t f32 = tc_out_fp32, f16 = tc_out_fp16;

// The device lookup tries the rows in order; no row's name piece occurs in
// another GPU's device name ("a2" is not in "NVIDIA A30"). A device
// whose name matches none (GeForce and RTX cards) is found by its compute
// capability.
constexpr TensorCoreGpu kGpus[] = {
    {"v100", "V100", "v100", 70, "NVIDIA V100 (Volta, sm_70)"},
    {"t4", "T4", "t4", 75, "NVIDIA T4 (Turing, sm_75)"},
    {"a100", "A100", "a100", 80, "NVIDIA A100 (Ampere, sm_80)"},
    {"a2", "A2", "a2", 0, "NVIDIA A2 (Ampere, sm_86)"},
    {"a30", "A30", "a30", 0, "NVIDIA A30 (Ampere, sm_80)"},
    {"ada", "Ada", "", 89, "Ada Lovelace (sm_89)"},
    {"l40s", "L40S", "l40s", 0, "NVIDIA L40S (Ada Lovelace, sm_89)"},
    {"h100", "H100", "h100", 90, "NVIDIA H100 (Hopper, sm_90)"},
    {"h200", "H200", "h200", 0, "NVIDIA H200 (Hopper, sm_90)"},
    {"b200", "B200", "b200", 100, "NVIDIA B200 (Blackwell, sm_100)"},
    {"rtx5090", "RTX5090", "rtx 50,rtx pro 6000", 120, "NVIDIA RTX Blackwell (GeForce RTX 50, sm_120)"},
    {"mi100", "MI100", "", 0, "AMD Instinct MI100 (CDNA1)"},
    {"mi250", "MI250", "", 0, "AMD Instinct MI250 (CDNA2)"},
    {"mi300", "MI300", "", 0, "AMD Instinct MI300 (CDNA3)"},
};

// Rows name their fields (TensorCorePresetRow); an unnamed field keeps its
// default: no extra alignment bits, the output's own result bits, no floor,
// C aligned with the products, one step per instruction, zero operands at
// 2^-126.
//
// Every measured generation (FHMP21, KM25, golden): exact products, alignment
// to the largest exponent with truncation to 23 + extra bits, one
// normalisation that truncates for binary32 output and rounds to nearest even
// for binary16 output. bf16 and tf32 have no binary16-accumulator instruction
// (PTX takes f32 there); their fp16-output rows give what the datapath would
// do, so that specs written before this table keep their meaning.
constexpr TensorCorePresetRow kRows[] = {
    // Volta: fp16 only, 4 products per step, no extra alignment bit.
    {.gpus = "v100",
     .instructions = mma,
     .inputs = tc_fp16,
     .outputs = f32,
     .terms_per_step = 4,
     .rounding = RTZ,
     .citation = "FHMP21 Sec. 5; KM25 V100TC.m; golden V100 fp16 (K = 4)"},
    {.gpus = "v100",
     .instructions = mma,
     .inputs = tc_fp16,
     .outputs = f16,
     .terms_per_step = 4,
     .rounding = RNE,
     .citation = "FHMP21 Sec. 5; KM25 V100TC.m; golden V100 fp16 (K = 4)"},
    // Turing: 1 extra bit, and m16n8k8 is ONE 8-product step (MMA-Sim's
    // Turing model, no split-K): the 4 per step taken from Volta before
    // matched MMA-Sim's m16n8k8 vectors on 73-83% only. m8n8k4 is one step of
    // 4 either way. No real-GPU data here.
    {.gpus = "t4",
     .instructions = mma,
     .inputs = tc_fp16,
     .outputs = f32,
     .terms_per_step = 8,
     .extra_bits = 1,
     .rounding = RTZ,
     .citation = "MMA-Sim Turing (24 accumulator fraction bits, no split-K); mma-sim Turing"},
    {.gpus = "t4",
     .instructions = mma,
     .inputs = tc_fp16,
     .outputs = f16,
     .terms_per_step = 8,
     .extra_bits = 1,
     .rounding = RNE,
     .citation = "MMA-Sim Turing (24 accumulator fraction bits, no split-K); mma-sim Turing"},
    // Ampere: fp16/bf16 8 per step, tf32 4, 1 extra bit.
    {.gpus = "a100 a2 a30",
     .instructions = mma,
     .inputs = tc_fp16 | tc_bf16,
     .outputs = f32,
     .terms_per_step = 8,
     .extra_bits = 1,
     .rounding = RTZ,
     .citation = "FHMP21 Sec. 6; KM25 A100TC.m, A2TC.m, A30TC.m; golden A100 fp16, bf16"},
    {.gpus = "a100 a2 a30",
     .instructions = mma,
     .inputs = tc_fp16 | tc_bf16,
     .outputs = f16,
     .terms_per_step = 8,
     .extra_bits = 1,
     .rounding = RNE,
     .citation = "FHMP21 Sec. 6; KM25 A100TC.m; golden A100 fp16 -> fp16"},
    {.gpus = "a100 a2 a30",
     .instructions = mma,
     .inputs = tc_tf32,
     .outputs = f32,
     .terms_per_step = 4,
     .extra_bits = 1,
     .rounding = RTZ,
     .citation = "KM25 A100TC.m; golden A100 tf32"},
    {.gpus = "a100 a2 a30",
     .instructions = mma,
     .inputs = tc_tf32,
     .outputs = f16,
     .terms_per_step = 4,
     .extra_bits = 1,
     .rounding = RNE,
     .citation = "KM25 A100TC.m"},
    // Ada: as Ampere for fp16/bf16/tf32. FP8: 16 products per step and a
    // 13-bit accumulator: aligned terms and the binary32 result are cut to 13
    // fraction bits (KM25's neab = -10); K = 32 is two chained steps.
    {.gpus = "ada l40s",
     .instructions = mma,
     .inputs = tc_fp16 | tc_bf16,
     .outputs = f32,
     .terms_per_step = 8,
     .extra_bits = 1,
     .rounding = RTZ,
     .citation = "KM25 AdaTC.m, L40STC.m; golden Ada fp16, bf16"},
    {.gpus = "ada l40s",
     .instructions = mma,
     .inputs = tc_fp16 | tc_bf16,
     .outputs = f16,
     .terms_per_step = 8,
     .extra_bits = 1,
     .rounding = RNE,
     .citation = "KM25 AdaTC.m; golden Ada fp16 -> fp16"},
    {.gpus = "ada l40s",
     .instructions = mma,
     .inputs = tc_tf32,
     .outputs = f32,
     .terms_per_step = 4,
     .extra_bits = 1,
     .rounding = RTZ,
     .citation = "KM25 AdaTC.m; golden Ada tf32"},
    {.gpus = "ada l40s",
     .instructions = mma,
     .inputs = tc_tf32,
     .outputs = f16,
     .terms_per_step = 4,
     .extra_bits = 1,
     .rounding = RNE,
     .citation = "KM25 AdaTC.m"},
    {.gpus = "ada l40s",
     .instructions = mma,
     .inputs = tc_fp8,
     .outputs = f32,
     .terms_per_step = 16,
     .extra_bits = -10,
     .result_bits = 13,
     .rounding = RTZ,
     .citation = "KM25 AdaTC.m (neab = -10); golden Ada E4M3, E5M2 -> fp32 (K = 32)"},
    {.gpus = "ada l40s",
     .instructions = mma,
     .inputs = tc_fp8,
     .outputs = f16,
     .terms_per_step = 16,
     .extra_bits = -10,
     .rounding = RNE,
     .citation = "KM25 AdaTC.m; golden Ada E4M3, E5M2 -> fp16 (K = 32)"},
    // Hopper: fp16/bf16 16 per step, tf32 8 (KM25; the golden H100 tf32 vectors
    // have K = 4), 2 extra bits, products aligned no lower than 2^-133 (KM25
    // min_exp_limit; the stress data allow -133 to -135 only). wgmma and
    // mma.sync agree except for FP8. H200 (also sm_90) has no data of its own.
    {.gpus = "h100 h200",
     .instructions = both,
     .inputs = tc_fp16 | tc_bf16,
     .outputs = f32,
     .terms_per_step = 16,
     .extra_bits = 2,
     .rounding = RTZ,
     .alignment_floor = -133,
     .citation = "KM25 H100TC.m, H200TC.m; golden and stress H100 fp16, bf16"},
    {.gpus = "h100 h200",
     .instructions = both,
     .inputs = tc_fp16 | tc_bf16,
     .outputs = f16,
     .terms_per_step = 16,
     .extra_bits = 2,
     .rounding = RNE,
     .alignment_floor = -133,
     .citation = "KM25 H100TC.m; golden and stress H100 fp16 -> fp16"},
    {.gpus = "h100 h200",
     .instructions = both,
     .inputs = tc_tf32,
     .outputs = f32,
     .terms_per_step = 8,
     .extra_bits = 2,
     .rounding = RTZ,
     .alignment_floor = -133,
     .citation = "KM25 H100TC.m; golden and stress H100 tf32 (K = 4)"},
    {.gpus = "h100 h200",
     .instructions = both,
     .inputs = tc_tf32,
     .outputs = f16,
     .terms_per_step = 8,
     .extra_bits = 2,
     .rounding = RNE,
     .alignment_floor = -133,
     .citation = "KM25 H100TC.m"},
    // FP8 mma.sync (m16n8k32), either accumulator: not the FP8 datapath but
    // the fp16 one, as if each register's four FP8 values were unpacked to
    // binary16: two chained 16-product steps with 25 bits and the fp16 path's
    // rounding between them, the first over k = 0,1, 4,5, ..., the second over
    // k = 2,3, 6,7, ..., from zero, C added last by an IEEE addition in the
    // output format. tensor_core.hpp (step_interleave, CJoin) has the
    // alternatives that fail and their scores.
    {.gpus = "h100 h200",
     .instructions = mma,
     .inputs = tc_fp8,
     .outputs = f32,
     .terms_per_step = 16,
     .extra_bits = 2,
     .rounding = RTZ,
     .alignment_floor = -133,
     .c_join = CJoin::after_products,
     .terms_per_instruction = 32,
     .step_interleave = 2,
     .citation = "stress H100 E4M3, E5M2 -> fp32 (C loaded) 5000/5000 each, fitted on the first half"},
    {.gpus = "h100 h200",
     .instructions = mma,
     .inputs = tc_fp8,
     .outputs = f16,
     .terms_per_step = 16,
     .extra_bits = 2,
     .rounding = RNE,
     .alignment_floor = -133,
     .c_join = CJoin::after_products,
     .terms_per_instruction = 32,
     .step_interleave = 2,
     .citation = "golden and stress H100 E4M3, E5M2 -> fp16 5000/5000 each"},
    // FP8 wgmma: one 32-product step on a 13-bit accumulator (KM25 neab = -10).
    {.gpus = "h100 h200",
     .instructions = tc_wgmma,
     .inputs = tc_fp8,
     .outputs = f32,
     .terms_per_step = 32,
     .extra_bits = -10,
     .result_bits = 13,
     .rounding = RTZ,
     .alignment_floor = -133,
     .citation = "KM25 H100TC.m (neab = -10); golden H100 E4M3, E5M2 -> fp32 (wgmma, C = 0)"},
    {.gpus = "h100 h200",
     .instructions = tc_wgmma,
     .inputs = tc_fp8,
     .outputs = f16,
     .terms_per_step = 32,
     .extra_bits = -10,
     .rounding = RNE,
     .alignment_floor = -133,
     .citation = "KM25 H100TC.m; no measured data here (gpu-validate's wgmma kernels check it)"},
    // Blackwell: fp16/bf16 16 per step, tf32 8, 2 extra bits; floor 2^-133,
    // 2^-15 for binary16 output (KM25 B200TC.m min_exp_limit). Golden B200
    // fp16, bf16, tf32: KM25's public model_validation/B200, 5000/5000 each.
    {.gpus = "b200",
     .instructions = mma,
     .inputs = tc_fp16 | tc_bf16,
     .outputs = f32,
     .terms_per_step = 16,
     .extra_bits = 2,
     .rounding = RTZ,
     .alignment_floor = -133,
     .citation = "KM25 B200TC.m; golden B200 fp16, bf16 (model_validation/B200)"},
    {.gpus = "b200",
     .instructions = mma,
     .inputs = tc_fp16 | tc_bf16,
     .outputs = f16,
     .terms_per_step = 16,
     .extra_bits = 2,
     .rounding = RNE,
     .alignment_floor = -15,
     .citation = "KM25 B200TC.m; golden B200 fp16 -> fp16 (model_validation/B200)"},
    {.gpus = "b200",
     .instructions = mma,
     .inputs = tc_tf32,
     .outputs = f32,
     .terms_per_step = 8,
     .extra_bits = 2,
     .rounding = RTZ,
     .alignment_floor = -133,
     .citation = "KM25 B200TC.m; golden B200 tf32 (model_validation/B200)"},
    {.gpus = "b200",
     .instructions = mma,
     .inputs = tc_tf32,
     .outputs = f16,
     .terms_per_step = 8,
     .extra_bits = 2,
     .rounding = RNE,
     .alignment_floor = -15,
     .citation = "KM25 B200TC.m"},
    // FP8 mma.sync (m16n8k32, C loaded): not a 32-product FP8 step
    // (3207/3236 and 3108/3403 of 5000) but, as on Hopper's mma.sync, two
    // chained 16-product steps of the fp16 path (25 bits), interleaved by
    // pairs of k, from zero, C added last by an IEEE addition in the output
    // format; with fp32 output the steps truncate (as B200 fp16 -> fp32 does)
    // while the C add rounds to nearest even. 5000/5000 on all four sets and
    // on each half. fp16: contiguous halves, even/odd k, runs of 4 or 8, the
    // other step order, C in the first step, RTZ, or one step from zero match
    // 2306 to 4241 of 5000. fp32: C in the first step 2761/2756 (E4M3, E5M2),
    // an RTZ C add 3151/3183, C added as a two-term step cut to 25 bits
    // 3457/3449 (RTZ) or 4724/4722 (RNE); the data leave the steps' grouping
    // and width open (only E5M2 line 3936 separates RTZ steps from RNE ones).
    // README "B200 FP8" lists the GPU cases that would pin them.
    {.gpus = "b200",
     .instructions = mma,
     .inputs = tc_fp8,
     .outputs = f32,
     .terms_per_step = 16,
     .extra_bits = 2,
     .rounding = RTZ,
     .alignment_floor = -133,
     .c_join = CJoin::after_products,
     .terms_per_instruction = 32,
     .step_interleave = 2,
     .citation =
         "golden B200 E4M3, E5M2 -> fp32 (model_validation/B200, C loaded) 5000/5000 each, fitted on lines "
         "1-2500"},
    {.gpus = "b200",
     .instructions = mma,
     .inputs = tc_fp8,
     .outputs = f16,
     .terms_per_step = 16,
     .extra_bits = 2,
     .rounding = RNE,
     .alignment_floor = -15,
     .c_join = CJoin::after_products,
     .terms_per_instruction = 32,
     .step_interleave = 2,
     .citation =
         "golden B200 E4M3, E5M2 -> fp16 (model_validation/B200, C loaded) 5000/5000 each, fitted on lines "
         "1-2500"},
};

}  // namespace

std::span<const TensorCoreGpu> tensor_core_gpus() {
  return kGpus;
}

std::span<const TensorCorePresetRow> tensor_core_preset_rows() {
  // The measured rows first (the lookup takes the first match), then those
  // derived from MMA-Sim (tensor_core_preset_mmasim.cpp).
  static const std::vector<TensorCorePresetRow> rows = [] {
    std::vector<TensorCorePresetRow> r(std::begin(kRows), std::end(kRows));
    const auto more = tc_detail::mma_sim_preset_rows();
    r.insert(r.end(), more.begin(), more.end());
    return r;
  }();
  return rows;
}

}  // namespace rpsim::sim
