// Study 2, `tensor-cores`: which numerical features does each tensor-core
// preset have, found by running black-box probes against the model (as Fasi,
// Higham, Mikaitis & Pranesh, PeerJ CS 2021, and Khattak & Mikaitis, ACM TACO
// 2025, probed the hardware), and how does its GEMM error grow with K?
//
// The probes see only a dot-product function d = c + sum a_i b_i and the
// input/output formats; they never read the model's parameters, so the same
// code can probe a model, a GPU, or anything else with that signature.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/study/study.hpp"

namespace rpsim::sim::study {

// d = c + sum_i a_i*b_i for any K = a.size(); inputs are values of the input
// format, c and d values of the output format.
using DotProduct = std::function<double(std::span<const double> a, std::span<const double> b, double c)>;

struct DetectedFeatures {
  // Fraction bits that survive c + one small product (min of the alignment
  // width and the final normalisation width): 23 for an fp32 accumulator,
  // 13 for the FP8 accumulator of Ada/Hopper (Khattak & Mikaitis 2025).
  // Assumes a final rounding that does not round up a tiny remainder (RZ or
  // RN, as on every GPU measured): under round-up it reports the alignment
  // width instead.
  int accumulator_fraction_bits = -1;
  // Products fused into one step before the result is rounded to the output
  // format; nullopt if no rounding was seen within max_terms.
  std::optional<int> terms_per_step;
  // Alignment bits kept beyond accumulator_fraction_bits; extra_bits_capped
  // when the probe ran out of terms (it needs 2^j products for bit j).
  int extra_alignment_bits = -1;
  bool extra_bits_capped = false;
  // Rounding of the final normalisation; nullopt if the probe results match
  // no IEEE mode.
  std::optional<RoundingMode> final_rounding;
  std::optional<bool> subnormal_inputs;  // nullopt: the input format has no subnormals
  bool subnormal_outputs = false;        // a subnormal C comes back unchanged
};

// Runs every probe; max_terms bounds the terms-per-step search.
DetectedFeatures detect_features(const DotProduct& dot, const Format& input, const Format& output,
                                 int max_terms = 64);

StudyOutput run_tensor_cores(const StudyOptions& options);

}  // namespace rpsim::sim::study
