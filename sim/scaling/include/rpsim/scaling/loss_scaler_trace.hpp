// Running a loss scaler over a recorded sequence of overflow events, as
// `rpsim scaler` does: one line per step, 1 where that step's backward pass
// found an inf/NaN gradient.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "rpsim/scaling/loss_scaler.hpp"

namespace rpsim::sim {

// Reads one event per line: "0" (all gradients finite) or "1" (an inf or NaN
// was found). Blank lines and lines starting with '#' are skipped; trailing
// spaces and a CR are ignored. Throws std::invalid_argument naming
// `source:line` for anything else.
std::vector<bool> read_overflow_events(std::istream& in, const std::string& source);

struct ScalerStep {
  std::int64_t step = 0;  // 1-based optimizer step number
  double scale = 0;       // loss scale in effect for this step's backward pass
  bool skipped = false;   // this step's optimizer step is skipped
};

struct ScalerTrace {
  std::vector<ScalerStep> steps;
  // Set when the scaler stopped the run as upstream does (DeepSpeed with
  // raise_error_at_min_scale); `steps` then holds the steps before it.
  std::optional<std::string> stopped;
};

ScalerTrace run_loss_scaler(LossScaler& scaler, const std::vector<bool>& overflow_events);

// CSV with header "step,scale,skipped"; scale printed in the shortest form
// that reads back to the same binary64, skipped as 0/1.
std::string scaler_trace_csv(const ScalerTrace& trace);

}  // namespace rpsim::sim
