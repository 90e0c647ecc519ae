// The measured Tensor Core datapaths (tensor_core_preset_table.cpp names
// the GPUs and instructions that use each). "KM25" is Khattak & Mikaitis,
// "Accurate Models of NVIDIA Tensor Cores", ACM TACO 2025, with its public
// MATLAB models (north-numerical-computing/MATLAB-tensor-core, models/*TC.m);
// "FHMP21" is Fasi, Higham, Mikaitis & Pranesh, "Numerical behavior of NVIDIA
// tensor cores", PeerJ Comput. Sci. 2021. "golden" marks a datapath checked
// bit for bit against the measured vectors in shared/tc-golden, "stress"
// against shared/tc-stress (tests/sim/validation). Internal.
#pragma once

#include "rpsim/accumulation/tensor_core_presets.hpp"

namespace rpsim::sim::tc_detail {

inline constexpr auto RTZ = RoundingMode::toward_zero;
inline constexpr auto RNE = RoundingMode::nearest_even;
inline constexpr int none = kNoAlignmentFloor;
inline constexpr std::uint8_t f32 = tc_out_fp32, f16 = tc_out_fp16;

// A datapath is a TensorCorePresetRow without its GPU and instruction (the
// rows of tensor_core_preset_table.cpp add those). Datapaths name their
// fields; an unnamed field keeps its default: no extra alignment bits, the
// output's own result bits, no floor, C aligned with the products, one step
// per instruction, zero operands at 2^-126.
//
// Every measured generation (FHMP21, KM25, golden): exact products, alignment
// to the largest exponent with truncation to 23 + extra bits, one
// normalisation that truncates for binary32 output and rounds to nearest even
// for binary16 output. bf16 and tf32 have no binary16-accumulator instruction
// (PTX takes f32 there); their fp16-output rows give what the datapath would
// do, so that specs written before this table keep their meaning.

// Volta: fp16 only, 4 products per step, no extra alignment bit.
inline constexpr TensorCorePresetRow kVoltaFp16ToF32{
    .inputs = tc_fp16,
    .outputs = f32,
    .terms_per_step = 4,
    .rounding = RTZ,
    .citation = "FHMP21 Sec. 5; KM25 V100TC.m; golden V100 fp16 (K = 4)"};

inline constexpr TensorCorePresetRow kVoltaFp16ToF16{
    .inputs = tc_fp16,
    .outputs = f16,
    .terms_per_step = 4,
    .rounding = RNE,
    .citation = "FHMP21 Sec. 5; KM25 V100TC.m; golden V100 fp16 (K = 4)"};

// Turing: 1 extra bit, and m16n8k8 is ONE 8-product step (MMA-Sim's
// Turing model, no split-K): the 4 per step taken from Volta before
// matched MMA-Sim's m16n8k8 vectors on 73-83% only. m8n8k4 is one step of
// 4 either way. No real-GPU data here.
inline constexpr TensorCorePresetRow kTuringFp16ToF32{
    .inputs = tc_fp16,
    .outputs = f32,
    .terms_per_step = 8,
    .extra_bits = 1,
    .rounding = RTZ,
    .citation = "MMA-Sim Turing (24 accumulator fraction bits, no split-K); mma-sim Turing"};

inline constexpr TensorCorePresetRow kTuringFp16ToF16{
    .inputs = tc_fp16,
    .outputs = f16,
    .terms_per_step = 8,
    .extra_bits = 1,
    .rounding = RNE,
    .citation = "MMA-Sim Turing (24 accumulator fraction bits, no split-K); mma-sim Turing"};

// Ampere and Ada (measured on both, one datapath): fp16/bf16 8 per step,
// tf32 4, 1 extra bit.
inline constexpr TensorCorePresetRow kAmpereAdaFp16Bf16ToF32{
    .inputs = tc_fp16 | tc_bf16,
    .outputs = f32,
    .terms_per_step = 8,
    .extra_bits = 1,
    .rounding = RTZ,
    .citation =
        "FHMP21 Sec. 6; KM25 A100TC.m, A2TC.m, A30TC.m, AdaTC.m, L40STC.m; golden A100 and Ada fp16, bf16"};

inline constexpr TensorCorePresetRow kAmpereAdaFp16Bf16ToF16{
    .inputs = tc_fp16 | tc_bf16,
    .outputs = f16,
    .terms_per_step = 8,
    .extra_bits = 1,
    .rounding = RNE,
    .citation = "FHMP21 Sec. 6; KM25 A100TC.m, AdaTC.m; golden A100 and Ada fp16 -> fp16"};

inline constexpr TensorCorePresetRow kAmpereAdaTf32ToF32{
    .inputs = tc_tf32,
    .outputs = f32,
    .terms_per_step = 4,
    .extra_bits = 1,
    .rounding = RTZ,
    .citation = "KM25 A100TC.m, AdaTC.m; golden A100 and Ada tf32"};

inline constexpr TensorCorePresetRow kAmpereAdaTf32ToF16{.inputs = tc_tf32,
                                                         .outputs = f16,
                                                         .terms_per_step = 4,
                                                         .extra_bits = 1,
                                                         .rounding = RNE,
                                                         .citation = "KM25 A100TC.m, AdaTC.m"};

// Ada: as Ampere for fp16/bf16/tf32 (the constants above). FP8: 16 products per step and a
// 13-bit accumulator: aligned terms and the binary32 result are cut to 13
// fraction bits (KM25's neab = -10); K = 32 is two chained steps.
inline constexpr TensorCorePresetRow kAdaFp8ToF32{
    .inputs = tc_fp8,
    .outputs = f32,
    .terms_per_step = 16,
    .extra_bits = -10,
    .result_bits = 13,
    .rounding = RTZ,
    .citation = "KM25 AdaTC.m (neab = -10); golden Ada E4M3, E5M2 -> fp32 (K = 32)"};

inline constexpr TensorCorePresetRow kAdaFp8ToF16{
    .inputs = tc_fp8,
    .outputs = f16,
    .terms_per_step = 16,
    .extra_bits = -10,
    .rounding = RNE,
    .citation = "KM25 AdaTC.m; golden Ada E4M3, E5M2 -> fp16 (K = 32)"};

// Hopper: fp16/bf16 16 per step, tf32 8 (KM25; the golden H100 tf32 vectors
// have K = 4), 2 extra bits, products aligned no lower than 2^-133 (KM25
// min_exp_limit; the stress data allow -133 to -135 only). wgmma and
// mma.sync agree except for FP8. H200 (also sm_90) has no data of its own.
inline constexpr TensorCorePresetRow kHopperBlackwellFp16Bf16ToF32{
    .inputs = tc_fp16 | tc_bf16,
    .outputs = f32,
    .terms_per_step = 16,
    .extra_bits = 2,
    .rounding = RTZ,
    .alignment_floor = -133,
    .citation =
        "KM25 H100TC.m, H200TC.m, B200TC.m; golden and stress H100 fp16, bf16; golden B200 fp16, bf16 "
        "(model_validation/B200)"};

inline constexpr TensorCorePresetRow kHopperFp16Bf16ToF16{
    .inputs = tc_fp16 | tc_bf16,
    .outputs = f16,
    .terms_per_step = 16,
    .extra_bits = 2,
    .rounding = RNE,
    .alignment_floor = -133,
    .citation = "KM25 H100TC.m; golden and stress H100 fp16 -> fp16"};

inline constexpr TensorCorePresetRow kHopperBlackwellTf32ToF32{
    .inputs = tc_tf32,
    .outputs = f32,
    .terms_per_step = 8,
    .extra_bits = 2,
    .rounding = RTZ,
    .alignment_floor = -133,
    .citation =
        "KM25 H100TC.m, B200TC.m; golden and stress H100 tf32 (K = 4); golden B200 tf32 "
        "(model_validation/B200)"};

inline constexpr TensorCorePresetRow kHopperTf32ToF16{.inputs = tc_tf32,
                                                      .outputs = f16,
                                                      .terms_per_step = 8,
                                                      .extra_bits = 2,
                                                      .rounding = RNE,
                                                      .alignment_floor = -133,
                                                      .citation = "KM25 H100TC.m"};

// FP8 mma.sync (m16n8k32), either accumulator: not the FP8 datapath but
// the fp16 one, as if each register's four FP8 values were unpacked to
// binary16: two chained 16-product steps with 25 bits and the fp16 path's
// rounding between them, the first over k = 0,1, 4,5, ..., the second over
// k = 2,3, 6,7, ..., from zero, C added last by an IEEE addition in the
// output format. tensor_core.hpp (step_interleave, CJoin) has the
// alternatives that fail and their scores.
inline constexpr TensorCorePresetRow kHopperBlackwellFp8ToF32{
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
        "stress H100 E4M3, E5M2 -> fp32 (C loaded) 5000/5000 each, fitted on the first half; golden B200 "
        "E4M3, E5M2 -> fp32 (model_validation/B200, C loaded) 5000/5000 each, fitted on lines 1-2500"};

inline constexpr TensorCorePresetRow kHopperFp8ToF16{
    .inputs = tc_fp8,
    .outputs = f16,
    .terms_per_step = 16,
    .extra_bits = 2,
    .rounding = RNE,
    .alignment_floor = -133,
    .c_join = CJoin::after_products,
    .terms_per_instruction = 32,
    .step_interleave = 2,
    .citation = "golden and stress H100 E4M3, E5M2 -> fp16 5000/5000 each"};

// FP8 wgmma: one 32-product step on a 13-bit accumulator (KM25 neab = -10).
inline constexpr TensorCorePresetRow kHopperFp8ToF32Wgmma{
    .inputs = tc_fp8,
    .outputs = f32,
    .terms_per_step = 32,
    .extra_bits = -10,
    .result_bits = 13,
    .rounding = RTZ,
    .alignment_floor = -133,
    .citation = "KM25 H100TC.m (neab = -10); golden H100 E4M3, E5M2 -> fp32 (wgmma, C = 0)"};

inline constexpr TensorCorePresetRow kHopperFp8ToF16Wgmma{
    .inputs = tc_fp8,
    .outputs = f16,
    .terms_per_step = 32,
    .extra_bits = -10,
    .rounding = RNE,
    .alignment_floor = -133,
    .citation = "KM25 H100TC.m; no measured data here (gpu-validate's wgmma kernels check it)"};

// Blackwell: fp16/bf16 16 per step, tf32 8, 2 extra bits; floor 2^-133,
// 2^-15 for binary16 output (KM25 B200TC.m min_exp_limit). Golden B200
// fp16, bf16, tf32: KM25's public model_validation/B200, 5000/5000 each.
// With fp32 output these are Hopper's datapaths (kHopperBlackwell* above).
inline constexpr TensorCorePresetRow kBlackwellFp16Bf16ToF16{
    .inputs = tc_fp16 | tc_bf16,
    .outputs = f16,
    .terms_per_step = 16,
    .extra_bits = 2,
    .rounding = RNE,
    .alignment_floor = -15,
    .citation = "KM25 B200TC.m; golden B200 fp16 -> fp16 (model_validation/B200)"};

inline constexpr TensorCorePresetRow kBlackwellTf32ToF16{.inputs = tc_tf32,
                                                         .outputs = f16,
                                                         .terms_per_step = 8,
                                                         .extra_bits = 2,
                                                         .rounding = RNE,
                                                         .alignment_floor = -15,
                                                         .citation = "KM25 B200TC.m"};

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
// README "B200 FP8" lists the GPU cases that would pin them. With fp32
// output this is Hopper's datapath (kHopperBlackwellFp8ToF32 above).
inline constexpr TensorCorePresetRow kBlackwellFp8ToF16{
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
        "1-2500"};

}  // namespace rpsim::sim::tc_detail
