// rpsim scaler: replays a sequence of overflow events through one framework's
// loss scaler and prints the scale each step used and whether it was skipped.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/scaling/loss_scaler.hpp"
#include "rpsim/scaling/loss_scaler_trace.hpp"

namespace rpsim::cli {

namespace {

struct ScalerArgs {
  std::string policy;
  double init_scale = 0, growth_factor = 0, backoff_factor = 0, min_scale = 0, max_scale = 0;
  std::int64_t growth_interval = 0, hysteresis = 0;
  bool consecutive_hysteresis = false, raise_at_min_scale = false;
  std::string events;
  std::string output;
};

// The events of a file ('-': standard input); none at all is an error, not
// an empty table.
std::vector<bool> read_events(const std::string& path) {
  std::vector<bool> events;
  if (path == "-") {
    events = sim::read_overflow_events(std::cin, "<stdin>");
  } else {
    std::ifstream in(path);
    if (!in) throw UsageError(fmt::format("cannot open event file '{}'", path));
    events = sim::read_overflow_events(in, path);
  }
  if (events.empty())
    throw UsageError(fmt::format("event file '{}' holds no events (expected one 0 or 1 per line)",
                                 path == "-" ? "<stdin>" : path));
  return events;
}

void add_scaler(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "scaler",
      "Replay overflow events (one 0/1 per line, 1 = inf/NaN gradient) through a framework's loss scaler; "
      "prints CSV step,scale,skipped: the scale in effect during that step (before the step's update), "
      "skipped = 1 when the step's optimizer update was skipped");
  auto a = std::make_shared<ScalerArgs>();
  std::string policies;
  for (const auto& p : sim::loss_scaler_policies()) policies += (policies.empty() ? "" : " ") + p;
  cmd->add_option("--policy", a->policy, "loss scaler: " + policies)->required();
  auto* init = cmd->add_option("--init-scale", a->init_scale, "initial scale (static: the constant scale)");
  auto* growth =
      cmd->add_option("--growth-factor", a->growth_factor, "multiplier on growth (pytorch, megatron, tf2)");
  auto* backoff =
      cmd->add_option("--backoff-factor", a->backoff_factor, "multiplier on overflow (pytorch, megatron)");
  auto* interval =
      cmd->add_option("--growth-interval", a->growth_interval,
                      "clean steps before growing (DeepSpeed loss_scale_window, Apex scale_window, "
                      "Keras dynamic_growth_steps)");
  auto* hyst = cmd->add_option("--hysteresis", a->hysteresis,
                               "overflows tolerated before backing off (deepspeed, megatron)");
  cmd->add_flag("--consecutive-hysteresis", a->consecutive_hysteresis,
                "deepspeed: a clean step refills the hysteresis");
  auto* min = cmd->add_option("--min-scale", a->min_scale, "lower clamp (deepspeed, megatron, apex)");
  auto* max = cmd->add_option("--max-scale", a->max_scale, "upper clamp (apex)");
  cmd->add_flag(
      "--raise-at-min-scale", a->raise_at_min_scale,
      "deepspeed raise_error_at_min_scale: stop with an error (exit 2) on an overflow at min scale");
  cmd->add_option("--events", a->events, "event file, one 0/1 per line ('-' = standard input)")->required();
  cmd->add_option("-o,--output", a->output,
                  "write the CSV to this file (atomically) instead of standard output");
  cmd->callback([=, &action] {
    action = [=]() -> int {
      sim::ScalerConfig config;
      config.policy = a->policy;
      if (init->count()) config.init_scale = a->init_scale;
      if (growth->count()) config.growth_factor = a->growth_factor;
      if (backoff->count()) config.backoff_factor = a->backoff_factor;
      if (interval->count()) config.growth_interval = a->growth_interval;
      if (hyst->count()) config.hysteresis = a->hysteresis;
      if (min->count()) config.min_scale = a->min_scale;
      if (max->count()) config.max_scale = a->max_scale;
      config.consecutive_hysteresis = a->consecutive_hysteresis;
      config.raise_at_min_scale = a->raise_at_min_scale;
      auto scaler = sim::make_loss_scaler(config);  // validates before any input is read

      const sim::ScalerTrace trace = sim::run_loss_scaler(*scaler, read_events(a->events));
      const std::string csv = sim::scaler_trace_csv(trace);
      if (a->output.empty())
        fmt::print("{}", csv);
      else
        try {
          io::write_atomic(a->output, csv);
        } catch (const io::IoError& e) {
          throw UsageError(fmt::format("--output: {}", e.what()));
        }
      if (trace.stopped) {
        fmt::print(stderr, "rpsim: error: {}\n", *trace.stopped);
        return 2;
      }
      return 0;
    };
  });
}

const Registrar registered("scaler", add_scaler);

}  // namespace

}  // namespace rpsim::cli
