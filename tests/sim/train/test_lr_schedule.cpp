// DeepSpeed's WarmupLR and WarmupDecayLR, step by step (issue 26: a DeepSpeed
// "scheduler" was ignored and the run trained at a constant rate). The
// expected rates are worked out by hand from deepspeed/runtime/lr_schedules.py
// (WarmupLR.__init__ sets get_lr() at last_batch_iteration -1, i.e. the
// min_lrs; _get_gamma: log(i + 1) / log(W) or i / W while i < W, then 1, or
// WarmupDecayLR's max(0, (T - i) / max(1, T - W)); W = max(2,
// warmup_num_steps)) and the engine's _take_model_step (scheduler.step()
// after each optimizer step not skipped for an overflow): the step after
// `applied` applied steps runs at gamma(applied - 1).
#include <catch2/catch.hpp>
#include <cmath>

#include "rpsim/config/config_loader.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/lr_schedule.hpp"

using namespace rpsim::sim::config;
using namespace rpsim::sim::train;
using nlohmann::json;

TEST_CASE("DeepSpeed WarmupLR: log and linear warmup, step by step", "[train][lr_schedule]") {
  DeepSpeedSchedule s = read_deepspeed_schedule(
      json{{"type", "WarmupLR"}, {"warmup_min_lr", 1e-4}, {"warmup_max_lr", 1e-3}, {"warmup_num_steps", 10}},
      "scheduler.params");
  CHECK(s.lr_after(0) == 1e-4);  // the rate set when the scheduler is built
  CHECK(s.lr_after(1) == 1e-4);  // gamma(0) = log(1) / log(10) = 0
  CHECK(s.lr_after(2) == Approx(1e-4 + 9e-4 * 0.30102999566398120).epsilon(1e-14));  // log(2) / log(10)
  CHECK(s.lr_after(5) == Approx(1e-4 + 9e-4 * 0.69897000433601886).epsilon(1e-14));  // log(5) / log(10)
  CHECK(s.lr_after(10) == Approx(1e-3).epsilon(1e-15));                              // log(10) / log(10)
  CHECK(s.lr_after(500) == Approx(1e-3).epsilon(1e-15));                             // warmed up
  s.log_warmup = false;
  CHECK(s.lr_after(4) == Approx(1e-4 + 9e-4 * 0.3).epsilon(1e-15));  // gamma(3) = 3 / 10
  CHECK(s.lr_after(10) == Approx(1e-4 + 9e-4 * 0.9).epsilon(1e-15));
  CHECK(s.lr_after(11) == Approx(1e-3).epsilon(1e-15));
  // warmup_num_steps below 2 is raised to 2 (DeepSpeed: max(2, warmup_num_steps)).
  s.warmup_num_steps = 0;
  CHECK(s.lr_after(2) == Approx(1e-4 + 9e-4 * 0.5).epsilon(1e-15));
}

TEST_CASE("DeepSpeed WarmupDecayLR: warmup, then linear decay to 0 at total_num_steps",
          "[train][lr_schedule]") {
  const DeepSpeedSchedule s = read_deepspeed_schedule(json{{"type", "WarmupDecayLR"},
                                                           {"warmup_min_lr", 1e-4},
                                                           {"warmup_max_lr", 1e-3},
                                                           {"warmup_num_steps", 10},
                                                           {"warmup_type", "linear"},
                                                           {"total_num_steps", 30}},
                                                      "scheduler.params");
  CHECK(s.lr_after(11) == Approx(1e-3).epsilon(1e-15));                // gamma(10) = (30 - 10) / 20
  CHECK(s.lr_after(21) == Approx(1e-4 + 9e-4 * 0.5).epsilon(1e-15));   // gamma(20) = 10 / 20
  CHECK(s.lr_after(30) == Approx(1e-4 + 9e-4 * 0.05).epsilon(1e-14));  // gamma(29) = 1 / 20
  CHECK(s.lr_after(40) == 1e-4);                                       // max(0, ...): min_lr
}

TEST_CASE("DeepSpeed configs: scheduler translated or refused by name", "[train][lr_schedule]") {
  json ds = {{"train_batch_size", 8},
             {"optimizer", {{"type", "Adam"}, {"params", {{"lr", 0.001}}}}},
             {"scheduler",
              {{"type", "WarmupDecayLR"},
               {"params", {{"warmup_max_lr", 0.002}, {"warmup_num_steps", 5}, {"total_num_steps", 50}}}}}};
  const LoadedConfig l = read_config_json(ds, "ds.json");
  const Config c = l.parse();
  CHECK(c.optimizer.deepspeed.type == "WarmupDecayLR");
  CHECK(c.optimizer.lr_at(0, 0) == 0.0);  // warmup_min_lr's default, not optimizer.params.lr
  CHECK(c.optimizer.lr_at(7, 6) == Approx(0.002).epsilon(1e-15));  // gamma(5) = (50 - 5) / 45
  // A skipped step does not advance it: step 7 after 3 applied steps is at gamma(2).
  CHECK(c.optimizer.lr_at(7, 3) == Approx(0.002 * std::log(3.0) / std::log(5.0)).epsilon(1e-14));
  ds["scheduler"] = {{"type", "OneCycle"}, {"params", json::object()}};
  CHECK_THROWS_WITH(read_config_json(ds, "ds.json").parse(),
                    Catch::Contains("scheduler: DeepSpeed's OneCycle"));
  ds["scheduler"] = {{"type", "WarmupLR"}, {"params", {{"warmup_max_lr", "x"}}}};
  CHECK_THROWS_WITH(read_config_json(ds, "ds.json").parse(),
                    Catch::Contains("scheduler.params.warmup_max_lr"));
}
