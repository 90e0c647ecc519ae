// The training simulator: a network trained under a precision policy, with
// an FP64 shadow (same initial weights, same batches, every op in binary64)
// stepped in lockstep, per-step telemetry and memory accounting.
//
//   auto config = config::parse_config(json);     // the config layer (sim/config)
//   auto result = train::run(config, options);    // writes steps.csv, histograms.csv, meta.json
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rpsim/scaling/loss_scaler.hpp"
#include "rpsim/train/data.hpp"
#include "rpsim/train/layers.hpp"
#include "rpsim/train/memory.hpp"
#include "rpsim/train/model.hpp"
#include "rpsim/train/optimizer.hpp"
#include "rpsim/train/policy.hpp"
#include "rpsim/train/run_config.hpp"

namespace rpsim::sim::train {

// After each step (progress lines, a study's or sweep's own accounting).
struct StepReport {
  std::int64_t step = 0, total_steps = 0;  // steps done, steps planned
  int epoch = 0;                           // 0-based epoch of the step
  double loss = 0, loss_scale = 1;
};

struct RunOptions {
  std::filesystem::path out_dir;  // empty: write nothing
  // Where the steps done so far go when an interrupt cuts the run short
  // (meta.json "partial": true); empty: nothing is written then.
  std::filesystem::path partial_out_dir;
  std::FILE* progress = nullptr;  // warnings and evaluation lines (nullptr: silent)
  bool progress_is_terminal = false;
  std::function<void(const StepReport&)> on_step;
  // Under gradient accumulation, the parameter gradients of each micro-batch
  // as backward left them (micro 0, 1, ...: scaled by the loss scale over the
  // micro-batch count), then the accumulated ones before unscaling (micro
  // -1); with one micro-batch, only micro 0. For tests and studies of the
  // accumulation; read only.
  std::function<void(std::int64_t step, int micro, const std::vector<Parameter*>& params)> on_gradients;
  int threads = 0;  // OpenMP threads, 0: default
  // The data as the run's plan read it (a text set: config layer's
  // plan_run); null: run reads config.data itself.
  std::shared_ptr<const DataSplit> data;
};

struct Evaluation {
  std::int64_t step = 0;
  int epoch = 0;      // the epoch it ends (1-based)
  double epochs = 0;  // epochs done, a fraction when a steps limit ends one midway
  double test_accuracy_percent = 0;
  double shadow_test_accuracy_percent = NAN;  // NaN without shadow
  double test_loss_nats = 0;                  // mean loss per output row
  double shadow_test_loss_nats = NAN;         // NaN without shadow
  // "epoch 1" after whole epochs, "0.43 of epoch 1" midway.
  std::string label() const;
};

struct RunResult {
  bool interrupted = false;
  std::int64_t steps_done = 0;
  std::int64_t skipped_steps = 0;
  double final_loss = 0;
  double final_loss_scale = 1;
  std::vector<Evaluation> evaluations;
  MemoryReport memory;
  std::uint64_t parameter_count = 0;
  bool synthetic_data = false;
  std::string data_description;
  std::string steps_csv, histograms_csv, evaluations_csv;
  nlohmann::json meta;
};

// evaluations.csv, one row per evaluation: step, epoch,
// test_loss_emulated_nats, test_loss_fp64_nats, test_accuracy_emulated_percent,
// test_accuracy_fp64_percent (fp64 columns empty without shadow); the loss
// is the mean over the test set's output rows (text: tokens), top-1
// accuracy over the same rows.
//
// Under gradient accumulation a row is one optimizer step: the losses are
// the mean of its micro-batches' losses, the underflow fractions of weight
// gradients the mean over its micro-batches (the accumulator's roundings
// included), the activation-gradient and FP8 columns its last micro-batch's.
//
// steps.csv, one row per step: step, epoch, loss_emulated_nats,
// loss_fp64_nats (empty without shadow), loss_scale, skipped, overflow_found,
// grad_norm, then for each layer with parameters (fc0, conv0, ln0, ...):
//   <layer>_weight_grad_underflow_fraction      entries of the layer's
//       parameter gradients that a rounding flushed to zero (nonzero before,
//       zero after): to the op's output and the gradient format in backward,
//       then in unscaling and clipping;
//   <layer>_weight_grad_nonfinite_fraction      inf/NaN entries after unscaling;
//   <layer>_activation_grad_underflow_fraction  entries of the gradient
//       arriving at the layer that a rounding flushed to zero: where the op
//       that produced it rounded its result, passed on through activations
//       and pooling, or in this layer's cast of it (FP8: e5m2);
//   <layer>_activation_grad_nonfinite_fraction  inf/NaN entries of that
//       gradient (scaled: an overflow shows here before the unscale);
//   <layer>_weight_rel_distance_from_fp64       ||w - w64|| / ||w64|| after the
//       update (empty without shadow);
//   <layer>_weight_grad_zero_vs_fp64_fraction,
//   <layer>_activation_grad_zero_vs_fp64_fraction  entries zero in the
//       emulated run but nonzero in the FP64 shadow: underflow plus every
//       other difference in zeros once the runs diverge (ReLU masks), empty
//       without shadow;
//   <layer>_weight_update_stalled_fraction     entries of the layer's
//       parameters whose gradient was nonzero but whose stored value this
//       step's update left unchanged (the update rounded away in the
//       parameter format: Gupta et al. 2015's stall under round to nearest;
//       0 on a skipped step).
// Then, only under a policy that quantises matmul inputs to FP8 (fp8,
// fp8-delayed, fp8-current, fp8-mx), for each such layer in the order above
// and each tensor it quantises, <t> = <layer>.x (the input; Conv2d: its
// im2col matrix), <layer>.w (the weight), <layer>.dy (the output gradient,
// scaled by the loss scale):
//   <t>_fp8_amax                 max |entry| of the tensor this step;
//   <t>_fp8_scale                per-tensor scaling: the scale it was
//       quantised with (x * scale rounded to e4m3/e5m2). Delayed: from the
//       amax history of earlier steps (amax_history_len, amax_compute_algo)
//       by Transformer Engine's rule (sim/scaling DelayedScaling): 1 on the
//       first step, the previous scale kept while the history's amax is 0 or
//       not finite; current: max_finite / amax / 2^margin of this step, in
//       binary32; 1 when that amax is 0 or not finite;
//   <t>_fp8_scale_min, <t>_fp8_scale_max   MX instead: the smallest and
//       largest block scale 1 / 2^shared over blocks with a nonzero finite
//       amax (nan when none);
//   <t>_fp8_saturated_fraction   entries whose |x * scale| exceeded the
//       format's max finite and were clamped to it (under current
//       scaling only entries of magnitude amax, when the binary32 scale
//       rounded up);
//   <t>_fp8_flushed_fraction     nonzero entries that quantised to zero.
// Per-tensor fractions are over the tensor's forward quantisation (x, w) or
// its one backward quantisation (dy); MX quantises a tensor once per
// blocking (x and w again, transposed, in backward; dy along rows and
// columns), and its fractions are over all of that step's quantisations.
// Last, only under the adaptive loss scaler (Zhao et al. 2019), for each
// layer with parameters in the order above:
//   <layer>_loss_scale    the scale the gradient arriving at the layer, and
//       so its parameter gradients, carried this step (a value, like
//       loss_scale, not its log2): loss_scale times the per-layer factors
//       (powers of two) chosen at this layer and every layer after it; a
//       layer without a GEMM weight (ln) passes its successor's on. Its
//       gradients were unscaled by 1/<layer>_loss_scale.
// Evaluation forwards run after the row is written and do not show.
RunResult run(const Config& config, const RunOptions& options);

}  // namespace rpsim::sim::train
