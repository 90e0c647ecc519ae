// DeepSpeed's learning-rate schedulers (deepspeed/runtime/lr_schedules.py),
// step by step as its engine drives them, so that a DeepSpeed config's
// "scheduler" trains at the rates DeepSpeed would use. One row per scheduler
// translated (deepspeed_schedules()); the others are refused by name.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

namespace rpsim::sim::train {

struct DeepSpeedSchedule {
  std::string type;                                           // "": none; a row of deepspeed_schedules()
  double min_lr = 0.0, max_lr = 0.001;                        // warmup_min_lr, warmup_max_lr
  std::int64_t warmup_num_steps = 1000, total_num_steps = 0;  // total: WarmupDecayLR
  bool log_warmup = true;  // warmup_type "log" (DeepSpeed's default) or "linear"
  // The rate of the optimizer step taken after `applied` steps were applied.
  // DeepSpeed sets warmup_min_lr when the scheduler is built and steps it
  // after every optimizer step that was not skipped for an overflow (its
  // engine's _take_model_step), so the step after `applied` applied ones
  // runs at get_lr() with last_batch_iteration = applied - 1.
  double lr_after(std::int64_t applied) const;
};

struct DeepSpeedScheduleInfo {
  const char* name;
  bool decays;  // WarmupDecayLR: linear decay to 0 at total_num_steps after the warmup
};
std::span<const DeepSpeedScheduleInfo> deepspeed_schedules();
std::string deepspeed_schedule_names();  // "WarmupLR, WarmupDecayLR"

// {"type": NAME, warmup_min_lr, warmup_max_lr, warmup_num_steps, warmup_type,
// total_num_steps} at `path` (ConfigError naming the key otherwise).
DeepSpeedSchedule read_deepspeed_schedule(const nlohmann::json& j, const std::string& path);

}  // namespace rpsim::sim::train
