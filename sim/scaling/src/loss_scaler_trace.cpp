#include "rpsim/scaling/loss_scaler_trace.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace rpsim::sim {

std::vector<bool> read_overflow_events(std::istream& in, const std::string& source) {
  std::vector<bool> events;
  std::string line;
  std::int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    if (line == "0" || line == "1") {
      events.push_back(line == "1");
      continue;
    }
    throw std::invalid_argument(fmt::format(
        "{}:{}: expected 0 (gradients finite) or 1 (inf/NaN found), got '{}'", source, line_number, line));
  }
  if (in.bad()) throw std::invalid_argument(fmt::format("{}: read error", source));
  return events;
}

ScalerTrace run_loss_scaler(LossScaler& scaler, const std::vector<bool>& overflow_events) {
  ScalerTrace trace;
  trace.steps.reserve(overflow_events.size());
  std::int64_t step = 0;
  for (const bool overflow : overflow_events) {
    ++step;
    const double scale = scaler.scale();
    try {
      const bool skipped = scaler.update(overflow);
      trace.steps.push_back({step, scale, skipped});
    } catch (const LossScaleAtMinimum& e) {
      trace.stopped = fmt::format("step {}: {}", step, e.what());
      break;
    }
  }
  return trace;
}

std::string scaler_trace_csv(const ScalerTrace& trace) {
  std::string out = "step,scale,skipped\n";
  for (const auto& s : trace.steps) out += fmt::format("{},{},{}\n", s.step, s.scale, s.skipped ? 1 : 0);
  return out;
}

}  // namespace rpsim::sim
