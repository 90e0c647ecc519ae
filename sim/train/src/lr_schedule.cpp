// DeepSpeed's schedulers, from WarmupLR._get_gamma and WarmupDecayLR._get_gamma
// in deepspeed/runtime/lr_schedules.py: lr = min + (max - min) * gamma(i),
// warmup_num_steps raised to at least 2, gamma(i) = log(i + 1) / log(W) (log)
// or i / W (linear) while i < W; then 1 (WarmupLR) or
// max(0, (T - i) / max(1, T - W)) (WarmupDecayLR).
#include "rpsim/train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::train {
namespace {

const DeepSpeedScheduleInfo kSchedules[] = {
    {"WarmupLR", false},
    {"WarmupDecayLR", true},
};

const DeepSpeedScheduleInfo* find(const std::string& name) {
  for (const auto& s : kSchedules)
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace

std::span<const DeepSpeedScheduleInfo> deepspeed_schedules() {
  return kSchedules;
}

std::string deepspeed_schedule_names() {
  std::string s;
  for (const auto& r : kSchedules) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

double DeepSpeedSchedule::lr_after(std::int64_t applied) const {
  if (applied <= 0) return min_lr;  // set when the scheduler is built (last_batch_iteration -1)
  const std::int64_t i = applied - 1, w = std::max<std::int64_t>(2, warmup_num_steps);
  double gamma = 1.0;
  if (i < w)
    gamma = log_warmup ? std::log(double(i + 1)) / std::log(double(w)) : double(i) / double(w);
  else if (find(type) && find(type)->decays)
    gamma = std::max(0.0, double(total_num_steps - i) / std::max(1.0, double(total_num_steps - w)));
  return min_lr + (max_lr - min_lr) * gamma;
}

DeepSpeedSchedule read_deepspeed_schedule(const nlohmann::json& j, const std::string& path) {
  using namespace config_json;
  expect_object(j, path);
  DeepSpeedSchedule s;
  if (!j.contains("type") || !j["type"].is_string())
    fail(join(path, "type"), "missing (" + deepspeed_schedule_names() + ")");
  s.type = j["type"].get<std::string>();
  const DeepSpeedScheduleInfo* info = find(s.type);
  if (!info)
    fail(join(path, "type"), "\"" + s.type + "\" is not simulated (" + deepspeed_schedule_names() + ")");
  for (const auto& [key, v] : j.items()) {
    const std::string p = join(path, key);
    if (key == "type") continue;
    if (key == "warmup_min_lr")
      s.min_lr = number(v, p);
    else if (key == "warmup_max_lr")
      s.max_lr = number(v, p);
    else if (key == "warmup_num_steps")
      s.warmup_num_steps = integer(v, p);
    else if (key == "total_num_steps" && info->decays)
      s.total_num_steps = integer(v, p);
    else if (key == "warmup_type") {
      if (!v.is_string() || (v.get<std::string>() != "log" && v.get<std::string>() != "linear"))
        fail(p, "expected \"log\" or \"linear\", got " + describe(v));
      s.log_warmup = v.get<std::string>() == "log";
    } else if (key == "last_batch_iteration") {
      if (integer(v, p) != -1) fail(p, "only -1 (a scheduler starting with the run) is simulated");
    } else {
      fail(p, "not a field of DeepSpeed's " + s.type);
    }
  }
  if (!(s.min_lr >= 0) || !(s.max_lr >= 0) || !std::isfinite(s.min_lr) || !std::isfinite(s.max_lr))
    fail(join(path, "warmup_max_lr"), "the rates must be finite numbers >= 0");
  if (s.warmup_num_steps < 0) fail(join(path, "warmup_num_steps"), "must be >= 0");
  if (info->decays && !j.contains("total_num_steps")) fail(join(path, "total_num_steps"), "missing");
  return s;
}

}  // namespace rpsim::sim::train
