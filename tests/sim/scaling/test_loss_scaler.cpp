// Loss scalers against trajectories worked out by hand from the upstream code
// cited in sim/scaling/src/loss_scaler_*.cpp (the full CSV cases live in
// tests/data/scaler and run through the CLI in tests/experiments).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "rpsim/scaling/loss_scaler.hpp"
#include "rpsim/scaling/loss_scaler_trace.hpp"

using namespace rpsim::sim;

namespace {

ScalerConfig policy(const std::string& name) {
  ScalerConfig c;
  c.policy = name;
  return c;
}

// Scale in effect for each of the given steps (1-based) when every step is clean.
std::vector<double> clean_scales(const ScalerConfig& config, std::int64_t steps) {
  auto s = make_loss_scaler(config);
  std::vector<double> scales;
  for (std::int64_t i = 0; i < steps; ++i) {
    scales.push_back(s->scale());
    REQUIRE_FALSE(s->update(false));
  }
  return scales;
}

std::string invalid_message(const ScalerConfig& c) {
  try {
    make_loss_scaler(c);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

TEST_CASE("default first growth step of every framework", "[scaler]") {
  // PyTorch: growth when tracker + 1 == 2000, i.e. on the 2000th clean step's
  // update: steps 1..2000 use 2^16, step 2001 uses 2^17.
  auto pt = clean_scales(policy("pytorch"), 4001);
  CHECK(pt[0] == 65536.0);
  CHECK(pt[1999] == 65536.0);
  CHECK(pt[2000] == 131072.0);
  CHECK(pt[3999] == 131072.0);
  CHECK(pt[4000] == 262144.0);

  // DeepSpeed (loss_scale_window 1000): stable_interval = cur_iter from a
  // start of last_overflow_iter = -1, growth when it is a positive multiple of
  // 1000, i.e. at cur_iter 1000 = the 1001st clean step: steps 1..1001 use
  // 2^16, step 1002 uses 2^17, and the next growth 1000 steps later.
  auto ds = clean_scales(policy("deepspeed"), 2002);
  CHECK(ds[1000] == 65536.0);
  CHECK(ds[1001] == 131072.0);
  CHECK(ds[2000] == 131072.0);
  CHECK(ds[2001] == 262144.0);

  // Megatron (loss_scale_window 1000): growth_tracker == 1000 on the 1000th
  // clean step: steps 1..1000 use 2^32, step 1001 uses 2^33.
  auto mg = clean_scales(policy("megatron"), 1001);
  CHECK(mg[999] == 4294967296.0);
  CHECK(mg[1000] == 8589934592.0);

  // Apex (scale_window 2000), Keras 3 and tf.keras (2000 steps) match PyTorch's count.
  auto ap = clean_scales(policy("apex"), 2001);
  CHECK(ap[1999] == 65536.0);
  CHECK(ap[2000] == 131072.0);
  auto ks = clean_scales(policy("keras"), 2001);
  CHECK(ks[1999] == 32768.0);
  CHECK(ks[2000] == 65536.0);
  auto tf = clean_scales(policy("tf2"), 2001);
  CHECK(tf[1999] == 32768.0);
  CHECK(tf[2000] == 65536.0);
}

TEST_CASE("DeepSpeed: after an overflow the next growth needs window + 1 clean steps",
          "[scaler][deepspeed]") {
  ScalerConfig c = policy("deepspeed");
  c.init_scale = 1024;
  c.growth_interval = 4;
  c.hysteresis = 1;
  auto s = make_loss_scaler(c);
  // Overflow at cur_iter 0 (step 1): 1024 -> 512, last_overflow_iter = 0.
  CHECK(s->update(true));
  CHECK(s->scale() == 512);
  // Clean steps at cur_iter 1..5: stable_interval 0..4, growth at 4 (5th clean step).
  for (int i = 0; i < 4; ++i) {
    CHECK_FALSE(s->update(false));
    CHECK(s->scale() == 512);
  }
  CHECK_FALSE(s->update(false));
  CHECK(s->scale() == 1024);
  // Then every 4 clean steps.
  for (int i = 0; i < 3; ++i) s->update(false);
  CHECK(s->scale() == 1024);
  s->update(false);
  CHECK(s->scale() == 2048);
}

TEST_CASE("DeepSpeed raise_error_at_min_scale raises on the overflow after reaching the minimum",
          "[scaler][deepspeed]") {
  ScalerConfig c = policy("deepspeed");
  c.init_scale = 4;
  c.min_scale = 1;
  c.hysteresis = 1;
  c.raise_at_min_scale = true;
  auto s = make_loss_scaler(c);
  CHECK(s->update(true));  // 4 -> 2
  CHECK(s->update(true));  // 2 -> 1: reaching the minimum does not raise
  CHECK(s->scale() == 1);
  CHECK_FALSE(s->update(false));
  CHECK_THROWS_AS(s->update(true), LossScaleAtMinimum);  // cur_scale == min_scale
  CHECK(s->scale() == 1);
}

TEST_CASE("DeepSpeed with hysteresis: an overflow that only spends hysteresis still skips",
          "[scaler][deepspeed]") {
  auto s = make_loss_scaler(policy("deepspeed"));  // hysteresis 2
  CHECK(s->update(true));
  CHECK(s->scale() == 65536);
  CHECK(s->update(true));
  CHECK(s->scale() == 32768);
}

TEST_CASE("binary32 scale storage where upstream keeps a float32 tensor", "[scaler]") {
  // PyTorch: torch.full((), init_scale, dtype=torch.float32), then
  // float(scale * backoff_factor) with the factor a double.
  ScalerConfig pt = policy("pytorch");
  pt.init_scale = 0.1;
  pt.backoff_factor = 0.3;
  auto s = make_loss_scaler(pt);
  CHECK(s->scale() == static_cast<double>(0.1f));
  s->update(true);
  CHECK(s->scale() == static_cast<double>(static_cast<float>(static_cast<double>(0.1f) * 0.3)));

  // Megatron: growth_factor is itself a float32 tensor, the product is binary32.
  ScalerConfig mg = policy("megatron");
  mg.init_scale = 3;
  mg.min_scale = 1;
  mg.growth_factor = 1.1;
  mg.growth_interval = 1;
  auto m = make_loss_scaler(mg);
  m->update(false);
  CHECK(m->scale() == static_cast<double>(3.0f * 1.1f));
  CHECK(m->scale() != 3.0 * 1.1);

  // DeepSpeed and Apex keep Python floats: binary64.
  ScalerConfig ds = policy("deepspeed");
  ds.init_scale = 0.1;
  ds.min_scale = 0.01;
  CHECK(make_loss_scaler(ds)->scale() == 0.1);
}

TEST_CASE("growth at the top of the binary32 range", "[scaler]") {
  const double top = std::ldexp(1.0, 127);
  auto grow_once = [&](const std::string& name) {
    ScalerConfig c = policy(name);
    c.init_scale = top;
    c.growth_interval = 1;
    if (name == "megatron" || name == "deepspeed") c.min_scale = 1;
    auto s = make_loss_scaler(c);
    s->update(false);
    return s->scale();
  };
  CHECK(grow_once("pytorch") == top);        // isfinite(new_scale) guard
  CHECK(grow_once("tf2") == top);            // _assign_if_finite
  CHECK(std::isinf(grow_once("megatron")));  // no guard on the float32 product
  CHECK(std::isinf(grow_once("keras")));     // no guard either
  // DeepSpeed's Python float has the binary64 range (growth on the 2nd clean step).
  ScalerConfig ds = policy("deepspeed");
  ds.init_scale = top;
  ds.growth_interval = 1;
  auto d = make_loss_scaler(ds);
  d->update(false);
  d->update(false);
  CHECK(d->scale() == std::ldexp(1.0, 128));
}

TEST_CASE("Megatron hysteresis tracker goes negative until a growth refills it", "[scaler][megatron]") {
  ScalerConfig c = policy("megatron");
  c.init_scale = 1024;
  c.hysteresis = 3;
  c.growth_interval = 100;
  auto s = make_loss_scaler(c);
  s->update(true);
  s->update(true);
  CHECK(s->scale() == 1024);  // tracker 3 -> 1
  s->update(true);
  CHECK(s->scale() == 512);  // tracker 0
  s->update(false);          // a clean step does not refill it
  s->update(true);
  CHECK(s->scale() == 256);  // tracker -1
  CHECK(s->state().find("hysteresis_tracker=-1") != std::string::npos);
}

TEST_CASE("Apex: without min_loss_scale the scale halves without bound", "[scaler][apex]") {
  ScalerConfig c = policy("apex");
  c.init_scale = 1;
  auto s = make_loss_scaler(c);
  for (int i = 0; i < 30; ++i) s->update(true);
  CHECK(s->scale() == std::ldexp(1.0, -30));
}

TEST_CASE("static and none", "[scaler]") {
  ScalerConfig st = policy("static");
  st.init_scale = 512;
  auto s = make_loss_scaler(st);
  CHECK(s->update(true));
  CHECK_FALSE(s->update(false));
  CHECK(s->scale() == 512);
  auto n = make_loss_scaler(policy("none"));
  CHECK_FALSE(n->update(true));
  CHECK(n->scale() == 1);
}

TEST_CASE("clone carries the counters", "[scaler]") {
  ScalerConfig c = policy("pytorch");
  c.init_scale = 2;
  c.growth_interval = 3;
  auto a = make_loss_scaler(c);
  a->update(false);
  a->update(false);
  auto b = a->clone();
  b->update(false);
  CHECK(b->scale() == 4);
  CHECK(a->scale() == 2);
}

TEST_CASE("resolved defaults", "[scaler]") {
  const auto ds = resolve_scaler_config(policy("deepspeed"));
  CHECK(*ds->init_scale == 65536);
  CHECK(*ds->growth_interval == 1000);
  CHECK(*ds->hysteresis == 2);
  CHECK(*ds->min_scale == 1);
  CHECK_FALSE(ds->growth_factor.has_value());
  const auto ap = resolve_scaler_config(policy("apex"));
  CHECK(*ap->max_scale == 16777216);
  CHECK_FALSE(ap->min_scale.has_value());
  const auto mg = resolve_scaler_config(policy("megatron"));
  CHECK(*mg->init_scale == 4294967296.0);
  CHECK(loss_scaler_policies().size() == 9);
}

TEST_CASE("a resolved config comes from resolve_scaler_config only, and the factory takes it as it is",
          "[scaler]") {
  // A config layer resolves once; the trainer's factory cannot be handed an unchecked one.
  static_assert(!std::is_constructible_v<ResolvedScalerConfig, ScalerConfig>);
  static_assert(!std::is_convertible_v<ScalerConfig, ResolvedScalerConfig>);
  CHECK(ResolvedScalerConfig()->policy == "none");
  CHECK(make_loss_scaler(ResolvedScalerConfig())->policy() == "none");
  const ResolvedScalerConfig ds = resolve_scaler_config(policy("deepspeed"));
  auto s = make_loss_scaler(ds);
  CHECK(s->policy() == "deepspeed");
  CHECK(s->scale() == 65536);
  ScalerConfig bad = policy("pytorch");
  bad.hysteresis = 2;
  CHECK_THROWS_WITH(resolve_scaler_config(bad), Catch::Contains("hysteresis is not a parameter"));
}

TEST_CASE("the adaptive row: a global scale (1 by default) and per-layer factors", "[scaler]") {
  const auto c = resolve_scaler_config(policy("adaptive"));
  CHECK(*c->init_scale == 1);
  auto a = make_loss_scaler(c);
  REQUIRE(a->per_layer() != nullptr);
  CHECK(a->scale() == 1);
  CHECK(a->update(true));  // an inf/NaN step is skipped
  CHECK_FALSE(a->update(false));
  CHECK(a->scale() == 1);  // no global back-off
  CHECK(a->state() == "skipped=1");
  CHECK(a->clone()->per_layer() != nullptr);
  ScalerConfig g = policy("adaptive");
  g.growth_interval = 3;
  CHECK_THAT(invalid_message(g), Catch::Contains("growth_interval"));
  CHECK(make_loss_scaler(policy("pytorch"))->per_layer() == nullptr);
}

TEST_CASE("invalid configurations name the field", "[scaler]") {
  ScalerConfig c = policy("pytorch");
  c.init_scale = -1;
  CHECK_THAT(invalid_message(c), Catch::Contains("init_scale"));
  c = policy("pytorch");
  c.init_scale = std::numeric_limits<double>::infinity();
  CHECK_THAT(invalid_message(c), Catch::Contains("init_scale"));
  c = policy("pytorch");
  c.growth_interval = 0;
  CHECK_THAT(invalid_message(c), Catch::Contains("growth_interval"));
  c = policy("pytorch");
  c.growth_factor = 1.0;
  CHECK_THAT(invalid_message(c), Catch::Contains("growth_factor"));
  c = policy("megatron");
  c.backoff_factor = 0;
  CHECK_THAT(invalid_message(c), Catch::Contains("backoff_factor"));
  c = policy("megatron");
  c.hysteresis = 0;
  CHECK_THAT(invalid_message(c), Catch::Contains("hysteresis"));
  c = policy("megatron");
  c.min_scale = 8;
  c.init_scale = 4;
  CHECK_THAT(invalid_message(c), Catch::Contains("min_scale"));
  c = policy("apex");
  c.init_scale = std::ldexp(1.0, 25);
  CHECK_THAT(invalid_message(c), Catch::Contains("max_scale"));
  c = policy("deepspeed");
  c.growth_factor = 3;
  CHECK_THAT(invalid_message(c), Catch::Contains("growth_factor is not a parameter"));
  c = policy("pytorch");
  c.consecutive_hysteresis = true;
  CHECK_THAT(invalid_message(c), Catch::Contains("consecutive_hysteresis"));
  c = policy("static");
  CHECK_THAT(invalid_message(c), Catch::Contains("init_scale is required"));
  CHECK_THAT(invalid_message(policy("Pytorch")), Catch::Contains("unknown loss scaler policy 'Pytorch'"));
}

TEST_CASE("event reader and trace CSV", "[scaler]") {
  std::istringstream in("# comment\n0\n1 \r\n\n0\n");
  const auto events = read_overflow_events(in, "mem");
  REQUIRE(events == std::vector<bool>{false, true, false});
  std::istringstream bad("0\nyes\n");
  CHECK_THROWS_WITH(read_overflow_events(bad, "f.txt"), Catch::Contains("f.txt:2:"));
  ScalerConfig c = policy("pytorch");
  c.init_scale = 4;
  auto s = make_loss_scaler(c);
  CHECK(scaler_trace_csv(run_loss_scaler(*s, events)) == "step,scale,skipped\n1,4,0\n2,4,1\n3,2,0\n");
}
