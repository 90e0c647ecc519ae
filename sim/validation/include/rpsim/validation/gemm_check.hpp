// Checking a whole GEMM measured on a GPU against an accumulation model, bit
// for bit: the library behind `rpsim gemm-check` (and the Python module).
//
// A dump holds A (M x K), B (K x N), D (M x N) and optionally C (M x N)
// and scales (SFA, SFB, scale_a, scale_b: gemm.hpp GemmScales), as
// NumPy writes them (.npz, or .npy files named A.npy ...; float16, float32
// or float64; bf16 and FP8 values stored exactly as float32) or as text
// matrices (one row per line).
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"

namespace rpsim::sim {

// A dump that cannot be checked: not a valid array file, a missing or
// misshapen array, values that are not of the model's formats. The message
// names the file and the array.
class GemmDumpError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

enum class DumpFormat { numpy, text };

struct GemmDump {
  std::string source;                   // the file(s), for messages
  std::map<char, std::string> sources;  // 'A' -> "run.npz: A"
  Matrix a, b, d;
  std::optional<Matrix> c;
  // Block scales SFA, SFB and _scaled_mm scales scale_a, scale_b (arrays of
  // those names, case-insensitive; gemm.hpp GemmScales), when the dump has them.
  GemmScales scales;
  std::string d_dtype;                        // "float16", "float32", "float64"
  std::string array_source(char name) const;  // sources[name]
};

// The arrays A, B, D and optionally C from `files`: one .npz, or .npy / text
// files whose stem is the array's name (A.npy or run_A.npy, case-insensitive
// on the letter). Checks they are 2-D and their shapes agree.
GemmDump load_gemm_dump(const std::vector<std::filesystem::path>& files, DumpFormat format);

// Checks that the dump is something `model` can be asked about: A and B hold
// values of model.input_format(), C and D values of model.output_format();
// and finite A, B and C where the model needs them (every model but the
// Tensor Core chains and kernel schedules, which follow IEEE). Throws
// GemmDumpError naming the array, the element and the value.
void check_dump_formats(const GemmDump& dump, const AccumulationModel& model);
// B's format under `model`: the instruction's input_b (mixed FP8 pairs,
// e4m3 x e5m2) where set, else the model's input format.
Format model_b_format(const AccumulationModel& model);

struct GemmMismatch {
  Eigen::Index row = 0, col = 0;
  double expected = 0, got = 0;
  double ulps = 0;  // got - expected in ulps: output-format values between them, signed
};

struct GemmCheckResult {
  std::string model;     // the model's spec
  std::string schedule;  // the concrete schedule a preset chose for this shape ("" otherwise)
  // Where that schedule's slices come from (KernelPreset::source): a cuBLASLt
  // heuristic table or the guess.
  std::string schedule_source;
  std::size_t total = 0, passed = 0;
  double max_ulps = 0, mean_ulps = 0;  // of |got - expected|, output format
  std::vector<GemmMismatch> first;     // in row-major order
  Matrix got;
};

// D under `model` against the dump's D, element by element on the output
// format's encodings (any NaN equals any NaN; -0 and +0 differ).
GemmCheckResult check_gemm(const GemmDump& dump, const AccumulationModel& model, std::size_t show = 10,
                           int threads = 1);

// got - expected in ulps of `out`: how many values of the format lie
// between them (signed; across a binade or zero each step counts one, so 1
// below 1.0 is one ulp in binary16 although its spacing is half); infinite
// when exactly one is not finite, 0 when both are the same non-finite value.
double ulp_difference(double expected, double got, const Format& out);
// The encoding of x in `out` (x must be a value of out), NaN canonical.
bool same_encoding(double expected, double got, const Format& out);

}  // namespace rpsim::sim
