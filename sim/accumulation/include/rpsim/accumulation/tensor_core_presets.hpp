// The GPU presets of the Tensor Core model: two constant tables, one row per
// GPU (its names) and one row per datapath (GPU, instruction, input kinds,
// output: the model's parameters and where they come from). Names, parsing,
// help text, error lists, the golden-data folder names and the device lookup
// of gpu-validate are all generated from them, so adding a GPU is a row in
// each table (tensor_core_presets.cpp) plus its tests.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim {

// One GPU a preset can be asked for by.
struct TensorCoreGpu {
  std::string_view preset;  // lower case, as in specs: "h100"
  // Folder of measured vectors (shared/tc-golden/<folder>) and the short name
  // gpu-validate writes its golden files under: "H100".
  std::string_view folder;
  // Lower-case pieces of a CUDA device name (cudaDeviceProp::name) that mean
  // this GPU, comma separated; the device lookup tries the rows in order.
  std::string_view device_names;
  int compute_capability;  // major*10 + minor: the lookup when no name matches; 0: never
  std::string_view description;
};
std::span<const TensorCoreGpu> tensor_core_gpus();

// Input kinds, instructions and outputs a row covers, as bit sets.
// tc_fp8: OCP e4m3 and e5m2 (either operand); tc_fp8_fnuz: AMD's fp8/bf8
// (E4M3FNUZ, E5M2FNUZ); tc_fp32 / tc_fp64: binary32 / binary64 operands
// (fma-chain datapaths); tc_fp4: e2m1.
enum TensorCoreInput : std::uint8_t {
  tc_fp16 = 1,
  tc_bf16 = 2,
  tc_tf32 = 4,
  tc_fp8 = 8,
  tc_fp64 = 16,
  tc_fp32 = 32,
  tc_fp4 = 64,
  tc_fp8_fnuz = 128
};
// The instruction bits (TensorCoreInstruction) are tensor_core.hpp's.
enum TensorCoreOutput : std::uint8_t { tc_out_fp32 = 1, tc_out_fp16 = 2, tc_out_fp64 = 4 };
// Block-scale formats a row takes (none: an unscaled datapath).
enum TensorCoreScale : std::uint8_t { tc_scale_ue8m0 = 1, tc_scale_ue4m3 = 2 };

// No alignment floor (TensorCoreModel::alignment_exponent_floor's default).
inline constexpr int kNoAlignmentFloor = -100000;

// One datapath: the TensorCoreModel fields a preset sets.
struct TensorCorePresetRow {
  // The preset and instruction of a lookup row (tensor_core_preset_rows():
  // one GPU, one instruction bit); a datapath constant
  // (tensor_core_datapaths.hpp) leaves them empty and the GPU rows of
  // tensor_core_preset_table.cpp fill them in.
  std::string_view gpus = {};
  std::uint8_t instructions = 0;  // TensorCoreInstruction bits
  std::uint8_t inputs = 0;        // TensorCoreInput bits (tc_fp8: e4m3 and e5m2)
  std::uint8_t outputs = 0;       // TensorCoreOutput bits
  int terms_per_step = 1;
  int extra_bits = 0;    // fraction_bits = 23 + extra_bits (negative: FP8's 13-bit datapath)
  int result_bits = -1;  // result_fraction_bits; -1: the output format's own
  RoundingMode rounding = RoundingMode::toward_zero;
  int alignment_floor = kNoAlignmentFloor;  // alignment_exponent_floor; kNoAlignmentFloor: none
  CJoin c_join = CJoin::aligned_with_products;
  int terms_per_instruction = 0;  // 0: one step per instruction
  int step_interleave = 0;
  std::string_view citation;  // where the numbers come from
  // The fields below default to NVIDIA's measured block FMA; rows from
  // MMA-Sim's models name them (designated initializers).
  Datapath datapath = Datapath::block_fma;
  // TensorCoreModel::zero_exponent. Every row: a zero operand aligns as if
  // its exponent were -126 (MMA-Sim's extract_significand_exponent), so
  // max * 0 can raise the alignment point above the other products. MMA-Sim
  // agreement with it, and without (Ada bf16 m16n8k16, Ampere tf32 m16n8k4,
  // Hopper tf32 mma m16n8k8 and wgmma: 5 cases of 386,000, each a finite max
  // times a zero), in the README; no tc-golden or tc-stress case has a zero
  // operand beside a product that large, and those stay at 100% either way.
  int zero_exponent = -126;
  bool two_stage = false;
  bool subnormals = true;   // false: subnormal inputs, C and results flushed (CDNA2)
  std::uint8_t scales = 0;  // TensorCoreScale bits; 0: unscaled
  int product_group = 0;    // TensorCoreModel::product_group
  // Block sizes the scales come in, as a bit set of the sizes themselves
  // (16 | 32): PTX's scale_vec (K / block scales per row of A) the
  // instruction takes.
  std::uint8_t scale_blocks = 0;
};
// The lookup rows: one per GPU, instruction and datapath, in lookup order
// (tensor_core_preset_table.cpp).
std::span<const TensorCorePresetRow> tensor_core_preset_rows();

// Preset names, lower case, in table order: v100 t4 a100 a2 a30 ada l40s h100 h200 b200.
const std::vector<std::string>& tensor_core_preset_names();
// One line per preset for --help: "h100: NVIDIA H100 (Hopper, sm_90) - fp16 bf16 tf32 e4m3 e5m2; mma.sync
// wgmma".
std::string tensor_core_preset_help();
// The instructions a preset has, e.g. "mma.sync wgmma".
std::string tensor_core_instruction_names(std::string_view preset);

// The preset for one GPU and instruction with the given input and output
// formats. `instruction` is "" (the default: mma.sync/WMMA, the same as
// "mma.sync") or "wgmma" (Hopper; differs from mma.sync for FP8 only). The
// model's `preset` and `instruction` fields say which row it came from.
// Throws std::invalid_argument naming the preset, or the format or instruction
// that GPU does not take, with the list of those it does.
TensorCoreModel tensor_core_preset(std::string_view gpu, const Format& input, const Format& output,
                                   std::string_view instruction = "");
// The same with B's format (mixed operands: e4m3 x e5m2, f16 x bf16) and,
// for block-scaled instructions, the scale format and block size (scale
// nullptr: unscaled). Instructions: mma.sync, wgmma, tcgen05.mma, mfma,
// mfma.1k.
TensorCoreModel tensor_core_preset(std::string_view gpu, const Format& input, const Format& output,
                                   std::string_view instruction, const Format& input_b, const Format* scale,
                                   int scale_block);
// The same with the instruction as its row.
TensorCoreModel tensor_core_preset(std::string_view gpu, const Format& input, const Format& output,
                                   TensorCoreInstruction instruction);
TensorCoreModel tensor_core_preset(std::string_view gpu, const Format& input, const Format& output,
                                   TensorCoreInstruction instruction, const Format& input_b,
                                   const Format* scale, int scale_block);

// The preset a golden-data folder name means: V100 -> v100, A100 -> a100,
// Ada -> ada, H100 -> h100, ... (case-insensitive); "" when unknown.
std::string preset_for_gpu_folder(std::string_view folder);
// The golden-data folder name (gpu-validate's short name) of a preset: h100 -> H100; "" when unknown.
std::string gpu_folder_for_preset(std::string_view preset);
// The preset for a CUDA device: by name (H100, H200, A100, L40S, B200, ...) or
// else by compute capability; "" when unknown.
std::string preset_for_device(std::string_view device_name, int cc_major, int cc_minor);

}  // namespace rpsim::sim
