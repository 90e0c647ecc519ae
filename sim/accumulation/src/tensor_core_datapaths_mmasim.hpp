// Tensor Core datapaths derived from MMA-Sim (Xie et al., arXiv
// 2511.10909; microsoft/MMA-Sim commit c785138, validated by its authors
// bitwise against real GPUs) where rpsim has no measured data: FP64, Blackwell
// tcgen05.mma, RTX Blackwell (sm_120), block scales, AMD CDNA1-3. Each is
// checked against shared/mma-sim (tests/sim/validation/test_mma_sim.cpp).
// Internal.
#pragma once

#include "tensor_core_datapaths.hpp"

namespace rpsim::sim::tc_detail {

// Datapaths name their fields; the unnamed ones keep the defaults of
// TensorCorePresetRow (zero operands align at 2^-126, as in MMA-Sim).
//
// FP64 mma (m8n8k4 from Ampere on; Hopper also m16n8k4/k8/k16) and AMD's f64
// v_mfma (CDNA2/3): a chain of binary64 FMAs in k order (MMA-Sim nv_ptx.mma
// and amd.mfma: fma per k).
inline constexpr TensorCorePresetRow kFp64FmaChain{
    .inputs = tc_fp64,
    .outputs = tc_out_fp64,
    .terms_per_step = 1,
    .result_bits = -1,
    .rounding = RNE,
    .alignment_floor = none,
    .citation = "MMA-Sim nv_ptx.mma and amd.mfma f64 (fma chain); mma-sim f64 files",
    .datapath = Datapath::fma_chain};

// MMA-Sim gives a zero C the exponent -126 and clamps a subnormal C
// there, so with binary32 C nothing aligns below 2^-126: these rows'
// alignment floor. (On H100 the stress data put the floor at 2^-133
// instead: MMA-Sim's 29 misses there, README "Tensor Core model".)
// Blackwell's 25-bit datapath: tcgen05.mma on B200 and mma.sync on RTX
// Blackwell (sm_120) are the same arithmetic in MMA-Sim (tcgen05mma and
// nv_ptx.mma RTX Blackwell), so each row below is one constant both GPUs'
// rows name. One step per instruction with 25 bits, FP8 too (not the 13-bit
// FP8 path of Ada/Hopper; no split-K on sm_120), f16 x bf16 operands allowed.
inline constexpr std::string_view kBlackwell25Citation =
    "MMA-Sim tcgen05mma and nv_ptx.mma RTX Blackwell; mma-sim Blackwell tcgen05mma and RTX Blackwell mma";
inline constexpr TensorCorePresetRow kBlackwell25Fp16Bf16ToF32{.inputs = tc_fp16 | tc_bf16,
                                                               .outputs = f32,
                                                               .terms_per_step = 16,
                                                               .extra_bits = 2,
                                                               .result_bits = -1,
                                                               .rounding = RTZ,
                                                               .alignment_floor = -126,
                                                               .citation = kBlackwell25Citation};

inline constexpr TensorCorePresetRow kBlackwell25Fp16Bf16ToF16{.inputs = tc_fp16 | tc_bf16,
                                                               .outputs = f16,
                                                               .terms_per_step = 16,
                                                               .extra_bits = 2,
                                                               .result_bits = -1,
                                                               .rounding = RNE,
                                                               .alignment_floor = -126,
                                                               .citation = kBlackwell25Citation};

inline constexpr TensorCorePresetRow kBlackwell25Tf32ToF32{.inputs = tc_tf32,
                                                           .outputs = f32,
                                                           .terms_per_step = 8,
                                                           .extra_bits = 2,
                                                           .result_bits = -1,
                                                           .rounding = RTZ,
                                                           .alignment_floor = -126,
                                                           .citation = kBlackwell25Citation};

// FP8: one 32-product step, 25 bits.
inline constexpr TensorCorePresetRow kBlackwell25Fp8ToF32{.inputs = tc_fp8,
                                                          .outputs = f32,
                                                          .terms_per_step = 32,
                                                          .extra_bits = 2,
                                                          .result_bits = -1,
                                                          .rounding = RTZ,
                                                          .alignment_floor = -126,
                                                          .citation = kBlackwell25Citation};

inline constexpr TensorCorePresetRow kBlackwell25Fp8ToF16{.inputs = tc_fp8,
                                                          .outputs = f16,
                                                          .terms_per_step = 32,
                                                          .extra_bits = 2,
                                                          .result_bits = -1,
                                                          .rounding = RNE,
                                                          .alignment_floor = -126,
                                                          .citation = kBlackwell25Citation};

// Block scales (mma.block_scale kind::mxf8f6f4 on sm_120,
// tcgen05.mma.block_scale on B200): the scales' exponents join each
// product's; FP8 one 32-product step with 25 bits. mxf4nvf4 (e2m1, K = 64):
// 16-product groups summed exactly, times the scales' significands (ue4m3
// read without its sign), aligned at the scales' exponents with a 35-bit
// accumulator, truncated to binary32 (MMA-Sim nv_fused_dot_add_with_block_scale).
// Blocks (PTX ISA, tcgen05.mma.block_scale, .scale_vec): mxf8f6f4 one
// scale per 32 (1X); mxf4nvf4 per 32 (2X) or 16 (4X).
inline constexpr TensorCorePresetRow kBlackwell25Fp8ToF32Mx{
    .inputs = tc_fp8,
    .outputs = f32,
    .terms_per_step = 32,
    .extra_bits = 2,
    .result_bits = -1,
    .rounding = RTZ,
    .alignment_floor = -126,
    .citation = "MMA-Sim mma_block_scale (sm_120) / tcgen05mma_block_scale mxf8f6f4; mma-sim block_scale",
    .scales = tc_scale_ue8m0,
    .scale_blocks = 32};

inline constexpr TensorCorePresetRow kBlackwell25Fp4ToF32BlockScaled{
    .inputs = tc_fp4,
    .outputs = f32,
    .terms_per_step = 64,
    .extra_bits = 12,
    .result_bits = -1,
    .rounding = RTZ,
    .alignment_floor = -126,
    .citation = "MMA-Sim mma_block_scale (sm_120) / tcgen05mma_block_scale mxf4nvf4; mma-sim block_scale",
    .scales = tc_scale_ue8m0 | tc_scale_ue4m3,
    .product_group = 16,
    .scale_blocks = 16 | 32};

// AMD CDNA (MMA-Sim amd.mfma; the CDNA3 ISA guide's v_mfma). f32 and f64:
// an FMA chain; CDNA1/2 f16 and bf16: binary32 FMA trees over groups of 4
// (bf16: 2; CDNA2's bf16_1k: 4), CDNA2 flushing subnormals; CDNA3 f16,
// bf16 (groups of 8), xf32 (4) and FP8 (16, even/odd two-stage): a fused
// dot with 24 bits, aligned with C rounding down, RNE to binary32.
inline constexpr TensorCorePresetRow kCdna123Fp32ToF32Mfma{.inputs = tc_fp32,
                                                           .outputs = f32,
                                                           .terms_per_step = 1,
                                                           .result_bits = -1,
                                                           .rounding = RNE,
                                                           .alignment_floor = none,
                                                           .citation = "MMA-Sim amd.mfma f32 (fma chain)",
                                                           .datapath = Datapath::fma_chain};

inline constexpr TensorCorePresetRow kCdna1Fp16ToF32Mfma{
    .inputs = tc_fp16,
    .outputs = f32,
    .terms_per_step = 4,
    .result_bits = -1,
    .rounding = RNE,
    .alignment_floor = none,
    .citation = "MMA-Sim amd.mfma CDNA1 f16 (pairwise, 4)",
    .datapath = Datapath::pairwise_fma};

inline constexpr TensorCorePresetRow kCdna1Bf16ToF32Mfma{
    .inputs = tc_bf16,
    .outputs = f32,
    .terms_per_step = 2,
    .result_bits = -1,
    .rounding = RNE,
    .alignment_floor = none,
    .citation = "MMA-Sim amd.mfma CDNA1 bf16 (pairwise, 2)",
    .datapath = Datapath::pairwise_fma};

inline constexpr TensorCorePresetRow kCdna2Fp16ToF32Mfma{
    .inputs = tc_fp16,
    .outputs = f32,
    .terms_per_step = 4,
    .result_bits = -1,
    .rounding = RNE,
    .alignment_floor = none,
    .citation = "MMA-Sim amd.mfma CDNA2 f16 (pairwise, 4, subnormals flushed)",
    .datapath = Datapath::pairwise_fma,
    .subnormals = false};

inline constexpr TensorCorePresetRow kCdna2Bf16ToF32Mfma{
    .inputs = tc_bf16,
    .outputs = f32,
    .terms_per_step = 2,
    .result_bits = -1,
    .rounding = RNE,
    .alignment_floor = none,
    .citation = "MMA-Sim amd.mfma CDNA2 bf16 (pairwise, 2, subnormals flushed)",
    .datapath = Datapath::pairwise_fma,
    .subnormals = false};

inline constexpr TensorCorePresetRow kCdna2Bf16ToF32Mfma1k{
    .inputs = tc_bf16,
    .outputs = f32,
    .terms_per_step = 4,
    .result_bits = -1,
    .rounding = RNE,
    .alignment_floor = none,
    .citation = "MMA-Sim amd.mfma CDNA2 bf16_1k (pairwise, 4, subnormals flushed)",
    .datapath = Datapath::pairwise_fma,
    .subnormals = false};

inline constexpr TensorCorePresetRow kCdna3Fp16Bf16ToF32Mfma{
    .inputs = tc_fp16 | tc_bf16,
    .outputs = f32,
    .terms_per_step = 8,
    .extra_bits = 1,
    .result_bits = -1,
    .rounding = RNE,
    .alignment_floor = none,
    .citation = "MMA-Sim amd.mfma CDNA3 f16/bf16 (fused, round-down alignment)",
    .datapath = Datapath::fused_round_down};

inline constexpr TensorCorePresetRow kCdna3Tf32ToF32Mfma{
    .inputs = tc_tf32,
    .outputs = f32,
    .terms_per_step = 4,
    .extra_bits = 1,
    .result_bits = -1,
    .rounding = RNE,
    .alignment_floor = none,
    .citation = "MMA-Sim amd.mfma CDNA3 xf32 (fused, round-down alignment)",
    .datapath = Datapath::fused_round_down};

inline constexpr TensorCorePresetRow kCdna3Fp8FnuzToF32Mfma{
    .inputs = tc_fp8_fnuz,
    .outputs = f32,
    .terms_per_step = 16,
    .extra_bits = 1,
    .result_bits = -1,
    .rounding = RNE,
    .alignment_floor = none,
    .citation = "MMA-Sim amd.mfma CDNA3 fp8/bf8 (two-stage fused, round-down alignment)",
    .datapath = Datapath::fused_round_down,
    .two_stage = true};

}  // namespace rpsim::sim::tc_detail
