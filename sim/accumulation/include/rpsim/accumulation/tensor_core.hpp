// The NVIDIA Tensor Core block-FMA model: ONE parameterised model and thin
// named presets per GPU and instruction (tensor_core_presets.hpp).
//
// What one block FMA step does (Fasi, Higham, Mikaitis & Pranesh 2021;
// Khattak & Mikaitis, "Accurate Models of NVIDIA Tensor Cores", ACM TACO 2025),
// every part a field below so that a preset is a handful of numbers:
//   1. the n = terms_per_step products a_i*b_i are exact;
//   2. every product and C are aligned to the largest exponent among them
//      (a product's exponent is ea+eb, its significand in [1,4));
//   3. aligned terms keep `fraction_bits` bits below that exponent, the rest
//      truncated (magnitude toward zero);
//   4. the aligned terms are summed exactly (fixed point, no rounding);
//   5. one normalisation at the end, rounded (`final_rounding`) to
//      `result_fraction_bits` and written out in the output format. A result
//      that rounds to zero is +0, whatever the sign of the sum it came from
//      (H100 stress data: 6 fp16->fp16, 12 bf16 and 96 tf32 cases whose sum
//      is a tiny negative number, C a subnormal binary32 value in 26 of them,
//      all come back +0; IEEE's -0 there, the old model, matched fp16->fp16
//      4994, bf16 4990, tf32 4960 of 5000). An exact zero is +0 too, even when
//      every term is -0 and C is -0 (MMA-Sim's rule, then measured on an
//      H200: gpu-validate's signed-zero patterns, C = +-0 with +0, -0 or
//      cancelling products, all +0 on mma.sync and wgmma in every format,
//      tests/data/tc-h200; tensor_core_chain.hpp, zero_sum_result).
// Longer K is a chain of steps: the result of step j is C of step j+1, so it is
// rounded to the output format between steps.
//
// One instruction (wgmma, most mma.sync) is usually one step. Hopper runs its
// FP8 mma.sync (m16n8k32) on the fp16 datapath as two chained steps of its own
// (terms_per_instruction, step_interleave) that start from zero, and adds C to
// their result at the end (c_join = after_products): see the fields below.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim {

// How C enters an instruction.
enum class CJoin : std::uint8_t {
  // C is one more term of the first step's fused multi-term sum (NVIDIA, every
  // measured path but the one below).
  aligned_with_products,
  // The instruction's steps start from zero (each rounded to the output format
  // as usual); C is then added to their result by an IEEE addition in the
  // output format: the exact sum rounded once to nearest even, whatever
  // final_rounding, fraction_bits and result_fraction_bits say.
  //
  // Why: Hopper's FP8 mma.sync with an f32 accumulator (H100 stress data,
  // E4M3/E5M2 -> fp32, C loaded) matches 2500/2500 on the first half of each
  // set (and 2500/2500 on the held-out second half) only so. Matches (E4M3,
  // E5M2, first half) with C added otherwise: as a two-term step of the
  // products' own path (aligned to 25 bits, truncated, rounded toward zero:
  // this field's meaning before) 2215, 2217; exact but rounded toward zero
  // 1868, 1859; aligned to 25 bits, then rounded to nearest 2418, 2426; cut
  // to 30 bits 2494, 2499, to 35 bits 2499, 2500 (40 and more: 2500, 2500,
  // indistinguishable from exact). For binary16 output the exact add and the
  // 25-bit aligned one agree on every case (5000/5000 on golden and stress
  // E4M3/E5M2 -> fp16).
  after_products
};

// What one instruction computes: NVIDIA's block FMA (the fields below), or
// one of the other datapaths MMA-Sim models (Xie et al., arXiv 2511.10909,
// microsoft/MMA-Sim simulator/arithmetic.py; tensor_core_paths.cpp).
enum class Datapath : std::uint8_t {
  // Steps 1-5 above (NVIDIA mma / wgmma / tcgen05).
  block_fma,
  // A chain of fused multiply-adds in the output format, one product at a
  // time (FP64 MMA on NVIDIA and AMD, AMD's f32 mfma): fma(a_k, b_k, acc).
  fma_chain,
  // AMD CDNA1/2 f16/bf16: groups of terms_per_step products summed by a
  // binary tree of binary32 FMAs (leaf fma(a, b, 0), node fma(l, 1, r)), each
  // group then added to the accumulator (binary32, nearest even); with
  // subnormal_outputs false every node and sum flushes to a signed zero.
  pairwise_fma,
  // AMD CDNA3 (f16, bf16, xf32, FP8): a fused dot of terms_per_step products
  // aligned to their largest exponent with fraction_bits bits (truncated),
  // the sum then aligned with C rounding down (toward -inf: 31 bits for the
  // sum, 24 for C), the total rounded to nearest even in binary32. With
  // two_stage (FP8) the even and odd products are two such dots first, each
  // rounded down to fraction_bits below the larger of their exponents.
  fused_round_down,
};

// The Tensor Core instructions, one row each of tensor_core_instructions():
// a bit each, so a preset row lists the instructions it covers as a set
// (tensor_core_presets.hpp). tc_mfma_1k: CDNA2's bf16 "_1k" mfma
// instructions (their own grouping).
enum TensorCoreInstruction : std::uint8_t {
  tc_mma_sync = 1,
  tc_wgmma = 2,
  tc_tcgen05 = 4,
  tc_mfma = 8,
  tc_mfma_1k = 16
};
struct TensorCoreInstructionRow {
  TensorCoreInstruction instruction;
  std::string_view name;  // as specs, conventions.json and gpu-validate write it: "mma.sync"
  std::string_view description;
};
std::span<const TensorCoreInstructionRow> tensor_core_instructions();
// "mma.sync", "wgmma", "tcgen05.mma", "mfma", "mfma.1k" (case-insensitive);
// "" is mma.sync (mma.sync/WMMA, every GPU's default). Throws
// std::invalid_argument listing the names.
TensorCoreInstruction parse_tensor_core_instruction(std::string_view name);
std::string_view tensor_core_instruction_name(TensorCoreInstruction instruction);

struct TensorCoreModel {
  std::string name;  // for display, e.g. "h100 mma.sync binary16->binary32"; never parsed
  // The preset (tensor_core_presets.hpp) and instruction the fields came from:
  // "h100" and tc_mma_sync or tc_wgmma; preset "" for a model built by hand.
  std::string preset;
  TensorCoreInstruction instruction = tc_mma_sync;
  Format input;   // fp16, bf16, tf32, e4m3, e5m2
  Format output;  // binary32 or binary16 (the accumulator/C/D format)
  int terms_per_step = 16;
  // Bits kept below the leading bit of the largest exponent when aligning:
  // 23 + the extra alignment bits (V100 0, A100/Ada 1, H100/B200 2).
  int fraction_bits = 25;
  // Precision of the final normalisation, fraction bits; -1: the output
  // format's own (FP8 on Ada/H100 keeps only 13 in an fp32 accumulator).
  int result_fraction_bits = -1;
  RoundingMode final_rounding = RoundingMode::toward_zero;
  bool subnormal_inputs = true;   // false: subnormal inputs read as zero
  bool subnormal_outputs = true;  // false: subnormal results flushed to zero
  // The alignment exponent is never taken below this (products tinier than
  // 2^floor share the grid of 2^floor); a very negative value disables it.
  int alignment_exponent_floor = -100000;
  CJoin c_join = CJoin::aligned_with_products;
  // Products per instruction when one instruction runs as several chained
  // steps; 0: one step per instruction (terms_per_instruction = terms_per_step).
  // A multiple of terms_per_step. Longer K is a chain of instructions, the
  // result of each C of the next (through c_join).
  int terms_per_instruction = 0;
  // Which products of an instruction each of its steps takes. 0: contiguous
  // runs, step s the products s*terms_per_step ... (s+1)*terms_per_step-1.
  // g > 0: runs of g products dealt to the steps in turn, step s takes the
  // products i (counted within the instruction) with (i / g) % steps == s; g
  // divides terms_per_step.
  //
  // Why: Hopper's mma.sync m16n8k32 FP8 is not its FP8 (wgmma) datapath,
  // with either accumulator. With an f16 accumulator, the golden H100
  // E4M3/E5M2 -> fp16 vectors (5,000 each) are reproduced bit for bit by two
  // 16-product binary16-style steps (fraction_bits 25, RNE to binary16
  // between them), the first over k = 0,1, 4,5, 8,9, ..., 28,29 and the
  // second over k = 2,3, 6,7, ..., 30,31 (g = 2, as if each thread's four
  // FP8 values per register were unpacked into a low and a high pair of
  // binary16 values), starting from
  // zero, with C added last (c_join = after_products). The data pin the
  // pattern, the step order, RNE between the steps and the late C; of the
  // width they say only >= 18 bits (25 is the fp16 path's). Matches (E4M3,
  // E5M2) of the alternatives: contiguous halves, even/odd k, runs of 4 or 8
  // at most 3485, 3827; the two steps in the other order 3476, 3755; C in the
  // first step 3113, 3153; RTZ between the steps 2322, 2911; one 32-product
  // FP8 step 3113, 3340.
  //
  // With an f32 accumulator (H100 stress E4M3/E5M2 -> fp32, C loaded; fitted
  // on the first 2,500 cases of each set): the same two steps with the fp16
  // -> fp32 path's own numbers (fraction_bits 25, each step truncated to
  // binary32), C added last by an IEEE binary32 addition (c_join): 2500/2500
  // and 2500/2500, and the same on the held-out 2,500 of each. Matches (E4M3,
  // E5M2, first half) of the alternatives: the 13-bit wgmma FP8 datapath 212,
  // 269; contiguous halves 2360, 2211; even/odd k 2366, 2207; runs of 4 2370,
  // 2198, of 8 2363, 2203; one 32-product 25-bit step 2393, 2271; the steps in
  // the other order 2353, 2146; both steps from zero, their results then
  // added (RNE) 2376, 2238; RNE instead of RTZ after each step 2327, 2133; C
  // in the first step 1941, 1859; fraction_bits 23, 24, 26, 30: 2305/2003,
  // 2406/2221, 2456/2349, 2428/2250. The alignment floor is not pinned (FP8
  // products are never below 2^-32).
  int step_interleave = 0;

  Datapath datapath = Datapath::block_fma;
  // B's format when it differs from A's (e4m3 x e5m2, f16 x bf16 on
  // tcgen05); unset: B is `input` too.
  std::optional<Format> input_b;
  // Exponent a zero operand takes in the alignment (a product's exponent is
  // ea + eb); the default: zeros never set the alignment. MMA-Sim gives every
  // zero the exponent -126 (extract_significand_exponent), so a zero a_k with
  // a large b_k raises the alignment point and truncates smaller products;
  // the presets do the same (tensor_core_presets.hpp). A zero C never sets
  // it: MMA-Sim's C = 0 at 2^-126 is what H100 stress bf16/tf32 contradict
  // (29 cases, C = 0 with a subnormal result; the 2^-133 floor matches).
  int zero_exponent = -30000;
  // CDNA3 FP8: even and odd products in two dots first (fused_round_down).
  bool two_stage = false;
  // Block scales (mma.block_scale, tcgen05.mma.block_scale): one scale of
  // format `scale` per scale_block products of A and of B; 0: none.
  int scale_block = 0;
  std::optional<Format> scale;
  // Products summed exactly in groups of this many before the scales and the
  // alignment (the mxf4nvf4 accumulator, MMA-Sim's
  // nv_fused_dot_add_with_block_scale); 0: every product aligned on its own.
  int product_group = 0;

  // Fraction bits of the final normalisation after resolving -1.
  int result_bits() const { return result_fraction_bits < 0 ? output.man_bits : result_fraction_bits; }
  // Products per instruction after resolving 0.
  int instruction_terms() const { return terms_per_instruction > 0 ? terms_per_instruction : terms_per_step; }
  // B's operand format.
  const Format& b_input() const { return input_b ? *input_b : input; }
  // Checks the fields (formats representable, widths in range); throws
  // std::invalid_argument naming the field.
  void validate() const;
};

// Inputs are doubles holding values exactly representable in model.input;
// c and the result hold values of model.output. Non-finite inputs follow IEEE
// (NaN if any NaN or inf - inf, else the infinity).
//
// One block FMA step over n <= terms_per_step products (fewer: zero-padded),
// C aligned with the products (the step itself; c_join, terms_per_instruction
// and step_interleave act at the instruction level, in tensor_core_dot).
double tensor_core_step(const TensorCoreModel& model, const double* a, const double* b, int n, double c);
// The full chain over K = a.size(): instructions of instruction_terms()
// products (the last one zero-padded), each a chain of steps of terms_per_step
// products picked by step_interleave, the result of each step rounded to the
// output format and fed as C to the next; C joins each instruction per c_join.
double tensor_core_dot(const TensorCoreModel& model, std::span<const double> a, std::span<const double> b,
                       double c);
// The same, returning the output format's encoding (for bit-exact checks:
// keeps the sign of zero).
// With block scales (model.scale_block > 0), scale_a / scale_b hold one value
// per scale_block products.
std::uint64_t tensor_core_dot_bits(const TensorCoreModel& model, std::span<const double> a,
                                   std::span<const double> b, double c, std::span<const double> scale_a = {},
                                   std::span<const double> scale_b = {});
// The per-step parameters of a block-FMA model as the shared arithmetic
// (tensor_core_step.hpp, the CPU's and the CUDA backend's) takes them.
struct TcStep;
TcStep tc_step_of(const TensorCoreModel& model);

// The datapaths other than block_fma and the block-scaled dot
// (tensor_core_paths.cpp); tensor_core_dot calls it for those.
double tensor_core_dot_other(const TensorCoreModel& model, std::span<const double> a,
                             std::span<const double> b, double c, std::span<const double> scale_a,
                             std::span<const double> scale_b);

}  // namespace rpsim::sim
