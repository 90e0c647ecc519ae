// Internal to the trainer: the rows of steps.csv and histograms.csv (columns
// documented in trainer.hpp).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "network.hpp"

namespace rpsim::sim::train {

// %.17g, or nan / inf / -inf: every binary64 value read back exactly.
std::string num(double v);

class Telemetry {
 public:
  // Columns for every layer of `model` that has parameters, and for each
  // tensor they quantise to FP8 under `policy` (none: no FP8 columns), and
  // given `per_layer_scales` (the adaptive loss scaler) each such layer's
  // loss scale.
  Telemetry(const Model& model, const PrecisionPolicy& policy,
            const std::vector<std::int64_t>& histogram_steps, bool per_layer_scales = false);

  // Histogram rows of `step` when it is a histogram step: the activation
  // gradients (unscaled) and weight gradients, emulated and FP64.
  void add_histograms(std::int64_t step, double scale, const Network& emu, const Network* shadow);
  // The gradient fractions of this step; call before the optimizer step.
  void measure_gradients(const Network& emu, const Network* shadow);
  // Appends the row: `head` (step ... grad_norm), then per layer the
  // fractions measured above and the weights' distance from the shadow
  // (call after the optimizer step), then the FP8 tensors' step, then the
  // scale each layer's gradients carried (emu.grad_scales).
  void add_row(const std::string& head, const Network& emu, const Network* shadow);

  std::string steps_csv;
  std::string histograms_csv = "step,layer,tensor,arithmetic,log2_abs_bin,count\n";

 private:
  const PrecisionPolicy& policy_;
  std::vector<std::size_t> tracked_;  // layers with parameters
  bool per_layer_scales_;
  std::set<std::int64_t> histogram_steps_;
  std::vector<double> under_, nonfinite_, activation_under_, activation_nonfinite_, zero_vs_,
      activation_zero_vs_;
  Matrix weights_emu_, weights_shadow_;  // one layer's weights in a column, reused every step
};

}  // namespace rpsim::sim::train
