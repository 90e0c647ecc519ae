// The host side of `rpsim gpu-validate`: generating cases, predicting every
// output bit with the emulator, comparing, and writing what the GPU returned
// as new golden files in the ../shared/tc-golden layout. Nothing here needs a
// GPU, so all of it is tested in CI; only the kernels' results need one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/validation/tensor_core_golden.hpp"

namespace rpsim::sim {

// Tensor-core cases for one input format and K: random values of the input
// format (wide exponent spread, ~10% subnormal, some zeros and cancellations)
// plus the detection patterns of Fasi et al. 2021 and Khattak & Mikaitis 2025
// (extra alignment bits, normalisation rounding, terms per step, subnormals in
// and out, FP8 accumulator width). Deterministic in `seed`. d_bits are 0.
GoldenSet generate_mma_cases(const std::string& gpu, const Format& input, const Format& output, std::size_t k,
                             std::size_t random_cases, std::uint64_t seed);

// Writes a/b/c/d files for `sets` (same input folder, different outputs share
// a, b and c) under dir/<gpu>/<input folder>/, atomically. Returns the folder.
std::filesystem::path write_golden(const std::filesystem::path& dir, const std::vector<GoldenSet>& sets);
// Writes every set under gpu_dir/<input folder>/ (sets of one input folder
// share a, b and c) and gpu_dir/conventions.json naming each set's
// instruction, whether C was loaded and its K, with "gpu": the sets' gpu (the
// name in the file names), so that load_golden_gpu(gpu_dir) reads them back
// with the right preset and instruction whatever the folder is called.
void write_golden_gpu(const std::filesystem::path& gpu_dir, const std::vector<GoldenSet>& sets);

// Folder name of an input format in the tc-golden layout: fp16 bf16 tf32 E4M3 E5M2.
std::string golden_folder_name(const Format& input);
// The name of an output format in d files and set names: fp32 or fp16.
std::string output_folder_name(const Format& output);

// A conversion intrinsic checked against rpsim's convert. NaN results compare
// as "NaN with any payload" (CUDA returns its canonical NaN); that rule is
// stated in the report.
struct ConversionSpec {
  std::string name;  // intrinsic
  Format from, to;
  RoundingMode rounding = RoundingMode::nearest_even;
  // CUDA's __NV_SATFINITE (PTX cvt .satfinite): every result is finite. A
  // finite input beyond the largest finite value and an infinity both give
  // the largest finite value of their sign; a NaN stays NaN.
  bool saturate = false;
  // The one NaN the intrinsic returns for every NaN input, whatever its sign
  // and payload, where CUDA has such a rule: __nv_cvt_fp8_to_halfraw gives
  // binary16 0x7FFF (cuda_fp8.hpp's host path, and device code before
  // sm_90), where rpsim's convert keeps sign and payload. -1: convert's NaN.
  std::int64_t nan_result = -1;
};
struct BitCheck {
  std::string name;
  std::size_t passed = 0, total = 0;
  std::vector<std::string> first_mismatches;
};
// What the intrinsic returns for one input, as rpsim predicts it.
std::uint64_t emulate_conversion(const ConversionSpec& spec, std::uint64_t in_bits);
void check_conversion(const ConversionSpec& spec, const std::vector<std::uint32_t>& in,
                      const std::vector<std::uint32_t>& got, BitCheck& check, std::size_t show = 5);
// The same for the binary32 inputs first, first + 1, ..., first + got.size()
// - 1 (bit patterns; spec.from must be binary32), predicted through the
// formats library's array path on all cores: gpu-validate's exhaustive check
// of all 2^32 inputs, chunk by chunk. Mismatches are listed lowest input first.
void check_conversion_range(const ConversionSpec& spec, std::uint32_t first,
                            std::span<const std::uint32_t> got, BitCheck& check, std::size_t show = 5);
// The emulator's results themselves for that range, on all cores.
void emulate_conversion_range(const ConversionSpec& spec, std::uint32_t first, std::span<std::uint32_t> out);
// The conversion intrinsics with binary32 input that gpu-validate checks
// exhaustively (__float2half_rn/rz/rd/ru, __float2bfloat16_rn/rz/rd/ru,
// __nv_cvt_float_to_fp8 E4M3/E5M2 with and without __NV_SATFINITE): their
// emulator side, for timing it without a GPU.
std::vector<ConversionSpec> float_conversion_specs();
// Inputs for conversion checks: every special value of the source format,
// the rounding boundaries of the target (midpoints and their neighbours),
// and `random` random patterns.
std::vector<std::uint32_t> conversion_inputs(const ConversionSpec& spec, std::size_t random,
                                             std::uint64_t seed);

}  // namespace rpsim::sim
