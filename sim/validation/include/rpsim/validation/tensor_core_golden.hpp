// Reading and checking tensor-core vectors measured on GPUs, laid out as
// shared/tc-golden/<GPU>/<input format>/{a,b,c,d}_<GPU>_<fmt>.txt (see that
// folder's README), for `rpsim tc-validate` and the golden tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "rpsim/formats/format.hpp"

namespace rpsim::sim {

// Malformed golden data; the message names the file and line.
class GoldenDataError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct GoldenCase {
  std::size_t line = 0;      // 1-based line in every file of the set
  std::vector<double> a, b;  // exact values of the input format
  std::uint32_t c_bits = 0;  // binary32 bits of C as stored
  std::uint32_t d_bits = 0;  // binary32 bits of the GPU's D (binary16 widened)
};

struct GoldenSet {
  std::string gpu;           // folder name, e.g. "H100"
  std::string input_folder;  // e.g. "E4M3"
  Format input;
  Format output;  // binary32 or binary16
  // How the set was measured: the instruction ("mma.sync", "wgmma"; "" when
  // the folder does not say) and whether C took part (false: the accumulator
  // started at zero and the c file is not used).
  std::string instruction;
  bool c_loaded = true;
  std::filesystem::path d_path;
  std::size_t k = 0;
  std::vector<GoldenCase> cases;
};

// Every (input format, output format) set under one GPU folder, sorted by
// input folder then output (fp32 before fp16). Throws GoldenDataError.
//
// The folder's conventions.json, when present, says per set ("E4M3/fp32")
// which instruction measured it and whether C was "loaded" or "zero"; every
// set must be listed there. Without the file the sets take tc-golden's
// published conventions: Hopper FP8 with binary32 output is wgmma with C = 0,
// everything else mma.sync with C loaded.
std::vector<GoldenSet> load_golden_gpu(const std::filesystem::path& gpu_dir);

// The measurement's conventions applied to a case: the C the GPU used
// (0 when the set's C was not loaded; binary16 output: C rounded to binary16,
// nearest even).
double golden_c(const GoldenSet& set, const GoldenCase& c);
bool golden_uses_wgmma(const GoldenSet& set);

struct GoldenCheck {
  std::size_t passed = 0, total = 0;
  std::vector<std::string> first_mismatches;  // "line N: a=[..] b=[..] c=.. expected 0x.. got 0x.."
};

// The model's D for every case, compared bit for bit (binary32 bits of D).
GoldenCheck check_golden(const GoldenSet& set, const TensorCoreModel& model, std::size_t show = 5);

// The preset for a set: `preset` (or the GPU folder's when empty), with the
// set's formats and instruction.
TensorCoreModel golden_model(const GoldenSet& set, const std::string& preset = "");

}  // namespace rpsim::sim
