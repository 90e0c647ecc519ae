// The host side of `rpsim gpu-validate`: generating cases, predicting every
// output bit with the emulator, comparing, and writing what the GPU returned
// as new golden files in the ../shared/tc-golden layout. Nothing here needs a
// GPU, so all of it is tested in CI; only the kernels' results need one.
#pragma once

#include <cstdint>
#include <filesystem>
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

// Folder name of an input format in the tc-golden layout: fp16 bf16 tf32 E4M3 E5M2.
std::string golden_folder_name(const Format& input);

// The tensor-core preset for a device: by name (H100, H200, A100, L40S, B200,
// ...) or else by compute capability; "" when unknown.
std::string preset_for_device(const std::string& device_name, int cc_major, int cc_minor);

// A conversion intrinsic checked against rpsim's convert. NaN results compare
// as "NaN with any payload" (CUDA returns its canonical NaN); that rule is
// stated in the report.
struct ConversionSpec {
  std::string name;  // intrinsic
  Format from, to;
  RoundingMode rounding = RoundingMode::nearest_even;
  bool saturate = false;
};
struct BitCheck {
  std::string name;
  std::size_t passed = 0, total = 0;
  std::vector<std::string> first_mismatches;
};
std::uint64_t emulate_conversion(const ConversionSpec& spec, std::uint64_t in_bits);
void check_conversion(const ConversionSpec& spec, const std::vector<std::uint32_t>& in,
                      const std::vector<std::uint32_t>& got, BitCheck& check, std::size_t show = 5);
// Inputs for conversion checks: every special value of the source format,
// the rounding boundaries of the target (midpoints and their neighbours),
// and `random` random patterns.
std::vector<std::uint32_t> conversion_inputs(const ConversionSpec& spec, std::size_t random,
                                             std::uint64_t seed);

}  // namespace rpsim::sim
