// Reading and checking MMA-Sim test vectors (shared/mma-sim: one file per
// architecture, instruction family and qualifier, one output element per
// line; see that folder's README) for `rpsim tc-validate FILE|DIR`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/validation/tensor_core_golden.hpp"

namespace rpsim::sim {

// One operand format of the layout: its header name ("e4m3", "tf32", "fp8"),
// rpsim's format and the hex digits of a field.
struct MmaSimFormat {
  std::string name;
  Format format;
  int digits = 0;
  // tf32 / xf32 arrive in a binary32 container whose low 13 bits the
  // instruction ignores; ue4m3 scales are read without their sign.
  std::uint64_t keep_mask = ~std::uint64_t{0};
};

struct MmaSimCase {
  std::size_t line = 0;              // 1-based line in the file
  std::vector<double> a, b, sa, sb;  // exact values (scales: one per block)
  double c = 0;
  std::uint64_t d_bits = 0;  // D's bit pattern in d_format
};

struct MmaSimFile {
  std::filesystem::path path;
  std::string arch, family, qualifier;  // "Hopper", "wgmma", "m64n8k32.f32.e4m3.e5m2"
  std::size_t k = 0;
  MmaSimFormat a, b, c, d;
  std::optional<MmaSimFormat> scale;  // block-scaled families only
  std::size_t block_size = 0;         // 0: no block scales
  bool nan_any = false;               // true: any NaN matches a NaN result ("is NaN")
  std::vector<MmaSimCase> cases;
};

// Whether `path` starts like an MMA-Sim vector file (its header names MMA-Sim).
bool is_mma_sim_file(const std::filesystem::path& path);
// Every MMA-Sim file of a folder (sorted by name), or the one file given.
std::vector<std::filesystem::path> mma_sim_files(const std::filesystem::path& file_or_dir);
// Parses one file; throws GoldenDataError naming the file, line and field.
MmaSimFile load_mma_sim_file(const std::filesystem::path& path);

// The rpsim preset and instruction a file's header names, e.g. Hopper + wgmma
// -> h100, "wgmma"; block-scaled families keep their block size in the model.
struct MmaSimTarget {
  std::string preset;                                // "" when no preset models this architecture
  std::optional<TensorCoreInstruction> instruction;  // none when no instruction models the family
};
MmaSimTarget mma_sim_target(const MmaSimFile& file);
// The model for a file; std::nullopt with `why` set when rpsim has no preset
// row for it (the preset, instruction or format pair is missing).
std::optional<TensorCoreModel> mma_sim_model(const MmaSimFile& file, std::string& why);

struct MmaSimCheck {
  std::size_t passed = 0, total = 0;
  std::vector<std::string> first_mismatches;  // "line N: c=.. expected .. got .."
  std::vector<std::size_t> mismatch_lines;
};
// The model's D for every case against the file's, bit for bit (NaN as "is
// NaN" where the header says so).
MmaSimCheck check_mma_sim(const MmaSimFile& file, const TensorCoreModel& model, std::size_t show = 5);

}  // namespace rpsim::sim
