// Gradient accumulation (gradient_accumulation_steps, grad_accum_format):
// the micro-batch gradients summed in the accumulator's format, each add
// rounded, checked against sums worked out here with the hardware's own
// binary32 adds and an independent bfloat16 rounding.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "csv_column.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/trainer.hpp"

using namespace rpsim::sim::config;
using namespace rpsim::sim::train;
using nlohmann::json;
using rpsim::sim::train::testing::column;

namespace {

json accum_config(int steps, int k) {
  return json::parse(R"({
    "name": "accum", "seed": 5, "policy": "bf16-amp",
    "model": {"type": "mlp", "hidden": [24]},
    "data": {"name": "synthetic", "synthetic_train_size": 192, "synthetic_test_size": 32},
    "optimizer": {"type": "sgd", "lr": 0.05},
    "batch_size": 48, "steps": )" +
                     std::to_string(steps) + R"(, "gradient_accumulation_steps": )" + std::to_string(k) +
                     "}");
}

// Copies of the gradients on_gradients shows at step 0, by micro index (-1: the sums).
using Grads = std::map<int, std::vector<Matrix>>;

RunResult run_capturing(const json& j, Grads& grads) {
  RunOptions o;
  o.on_gradients = [&](std::int64_t step, int micro, const std::vector<Parameter*>& params) {
    if (step != 0) return;
    for (const Parameter* p : params) grads[micro].push_back(p->grad);
  };
  return run(parse_config(j), o);
}

// Round to nearest even with an 8-bit significand (bfloat16), for the
// normal magnitudes gradients have here: not rpsim's rounding.
double bf16_round(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e = 0;
  const double m = std::frexp(x, &e);  // |m| in [0.5, 1)
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
}

}  // namespace

TEST_CASE(
    "grad accumulation: a binary32 accumulator holds the in-order binary32 sums of the micro-batch gradients",
    "[train][accumulation]") {
  Grads acc;
  run_capturing(accum_config(1, 3), acc);
  REQUIRE(acc.size() == 4);  // micro-batches 0, 1, 2 and the sums (-1)
  const auto& sums = acc.at(-1);
  REQUIRE(sums.size() == acc.at(0).size());
  std::size_t entries = 0;
  for (std::size_t p = 0; p < sums.size(); ++p)
    for (Eigen::Index i = 0; i < sums[p].size(); ++i) {
      // float + float is one binary32 add, rounded to nearest even.
      float s = float(acc.at(0)[p].data()[i]);
      for (int m = 1; m < 3; ++m) s = s + float(acc.at(m)[p].data()[i]);
      REQUIRE(sums[p].data()[i] == double(s));
      ++entries;
    }
  CHECK(entries > 1000);

  // The same 48 samples in one batch (gradient_accumulation_steps 1): the
  // micro-batches are the batch's thirds in order and each loss is divided
  // by 3 (scale 1, fl32(1/3)), so the sums are the batch's mean gradient up
  // to rounding. bf16-amp rounds each backward GEMM's output to bfloat16
  // (8 bits): the sum of three rounded thirds and the rounded whole differ
  // by a few of its ulps in many entries.
  Grads folded;
  run_capturing(accum_config(1, 1), folded);
  REQUIRE(folded.count(-1) == 0);  // no accumulation without micro-batches
  const auto& whole = folded.at(0);
  std::size_t differ = 0;
  double worst = 0;
  for (std::size_t p = 0; p < sums.size(); ++p) {
    worst = std::max(worst,
                     (sums[p] - whole[p]).cwiseAbs().maxCoeff() / (whole[p].cwiseAbs().maxCoeff() + 1e-30));
    differ += std::size_t((sums[p].array() != whole[p].array()).count());
  }
  CHECK(worst < 1.0 / 64);
  CHECK(worst > 0);
  CHECK(differ > 100);
}

TEST_CASE("grad accumulation: a bfloat16 accumulator rounds the cast and every add",
          "[train][accumulation]") {
  json j = accum_config(1, 3);
  j["grad_accum_format"] = "bfloat16";
  Grads acc;
  run_capturing(j, acc);
  const auto& sums = acc.at(-1);
  std::size_t inexact = 0;
  for (std::size_t p = 0; p < sums.size(); ++p)
    for (Eigen::Index i = 0; i < sums[p].size(); ++i) {
      double s = bf16_round(acc.at(0)[p].data()[i]);
      double exact = acc.at(0)[p].data()[i];
      for (int m = 1; m < 3; ++m) {
        s = bf16_round(s + acc.at(m)[p].data()[i]);
        exact += acc.at(m)[p].data()[i];
      }
      REQUIRE(sums[p].data()[i] == s);
      inexact += s != exact;
    }
  CHECK(inexact > 100);  // bfloat16's 8 bits drop most of the sums' bits

  // Those rounded sums train another run than the binary32 ones.
  json f = accum_config(4, 3);
  json b = f;
  b["grad_accum_format"] = "bfloat16";
  CHECK(run(parse_config(f), {}).steps_csv != run(parse_config(b), {}).steps_csv);
}

TEST_CASE("grad accumulation: one micro-batch is the run without accumulation", "[train][accumulation]") {
  json plain = accum_config(3, 1);
  plain.erase("gradient_accumulation_steps");
  json one = accum_config(3, 1);
  one["grad_accum_format"] = "bfloat16";  // no sum, so no rounding to it
  const RunResult a = run(parse_config(plain), {}), b = run(parse_config(one), {});
  CHECK(a.steps_csv == b.steps_csv);
  CHECK(a.histograms_csv == b.histograms_csv);
  // steps.csv keeps one row per optimizer step.
  const RunResult k = run(parse_config(accum_config(3, 4)), {});
  CHECK(column(k.steps_csv, "step").size() == 3);
  CHECK(k.steps_csv != a.steps_csv);
}

TEST_CASE("grad accumulation: an fp16 overflow in one micro-batch skips the whole step",
          "[train][accumulation]") {
  // DeepSpeed's FP16_Optimizer checks the accumulated gradients at the step
  // boundary (fp16/fused_optimizer.py, step -> has_overflow): the inf of one
  // micro-batch reaches the sum, the step is skipped and the scale backs off.
  json j = accum_config(4, 4);
  j["policy"] = "fp16-amp";
  j["grad_accum_format"] = "binary16";
  j["loss_scaler"] = {{"policy", "deepspeed"}, {"init_scale", 1024}, {"hysteresis", 1}};
  j["inject_overflow_steps"] = {2};
  Grads seen;
  RunOptions o;
  bool micro_inf = false, sum_inf = false;
  o.on_gradients = [&](std::int64_t step, int micro, const std::vector<Parameter*>& params) {
    if (step != 2) return;
    const bool inf = !params.front()->grad.allFinite();
    if (micro == 0) micro_inf = inf;
    if (micro == -1) sum_inf = inf;
    if (micro > 0) CHECK(params.front()->grad.allFinite());  // the other micro-batches are finite
  };
  const RunResult r = run(parse_config(j), o);
  CHECK(micro_inf);
  CHECK(sum_inf);
  CHECK(column(r.steps_csv, "skipped") == std::vector<std::string>{"0", "0", "1", "0"});
  CHECK(column(r.steps_csv, "overflow_found") == std::vector<std::string>{"0", "0", "1", "0"});
  const auto scale = column(r.steps_csv, "loss_scale");
  CHECK(std::stod(scale[3]) == std::stod(scale[2]) / 2);
  CHECK(r.skipped_steps == 1);
}

TEST_CASE("grad accumulation: bad values name the field", "[train][accumulation]") {
  json j = accum_config(1, 0);
  CHECK_THROWS_WITH(parse_config(j), Catch::StartsWith("gradient_accumulation_steps: must be at least 1"));
  j = accum_config(1, 5);
  CHECK_THROWS_WITH(parse_config(j),
                    Catch::StartsWith("gradient_accumulation_steps: batch_size 48 is not a multiple"));
  j = accum_config(1, 2);
  j["grad_accum_format"] = "binary17";
  CHECK_THROWS_WITH(parse_config(j), Catch::StartsWith("grad_accum_format: unknown format \"binary17\""));
  j = accum_config(1, 2);
  j["loss_scaler"] = {{"policy", "adaptive"}};
  CHECK_THROWS_WITH(parse_config(j), Catch::Contains("adaptive loss scaler"));
}

TEST_CASE("grad accumulation: DeepSpeed's batch fields and grad_accum_dtype are imported, not folded",
          "[train][accumulation][framework]") {
  auto parsed = [](const json& ds) { return read_config_json(ds, "x.json").parse(); };
  // The shipped bf16 example: 32 x 4 under ZeRO stage 2, where DeepSpeed
  // accumulates in the model's bf16 (engine.py get_data_types).
  const LoadedConfig shipped = read_config_file(RPSIM_SOURCE_DIR "/experiments/configs/deepspeed-bf16.json");
  Config c = shipped.parse();
  CHECK(c.batch_size == 128);
  CHECK(c.gradient_accumulation_steps == 4);
  REQUIRE(c.grad_accum_format);
  CHECK(c.grad_accum_format->name == "bfloat16");
  bool noted = false;
  for (const auto& n : shipped.notes)
    noted = noted || n.find("gradient_accumulation_steps 4") != std::string::npos;
  CHECK(noted);

  c = parsed({{"train_batch_size", 64}, {"gradient_accumulation_steps", 2}, {"fp16", {{"enabled", true}}}});
  CHECK(c.gradient_accumulation_steps == 2);
  CHECK(c.grad_accum_format->name == "binary16");  // FP16_Optimizer's fp16 .grad
  c = parsed(
      {{"train_batch_size", 64}, {"train_micro_batch_size_per_gpu", 16}, {"bf16", {{"enabled", true}}}});
  CHECK(c.gradient_accumulation_steps == 4);
  CHECK(c.grad_accum_format->name == "binary32");  // BF16_Optimizer without ZeRO
  c = parsed({{"train_micro_batch_size_per_gpu", 8},
              {"gradient_accumulation_steps", 3},
              {"bf16", {{"enabled", true}}},
              {"data_types", {{"grad_accum_dtype", "fp16"}}}});
  CHECK(c.batch_size == 24);
  CHECK(c.grad_accum_format->name == "binary16");

  CHECK_THROWS_WITH(parsed({{"train_batch_size", 128},
                            {"train_micro_batch_size_per_gpu", 32},
                            {"gradient_accumulation_steps", 3}}),
                    Catch::Contains("train_batch_size: 128 is not train_micro_batch_size_per_gpu 32"));
  CHECK_THROWS_WITH(parsed({{"train_batch_size", 8}, {"gradient_accumulation_steps", 0}}),
                    Catch::Contains("gradient_accumulation_steps: must be at least 1"));
  CHECK_THROWS_WITH(parsed({{"gradient_accumulation_steps", 2}, {"fp16", {{"enabled", true}}}}),
                    Catch::Contains("gradient_accumulation_steps: needs train_batch_size"));
  CHECK_THROWS_WITH(parsed({{"train_batch_size", 8}, {"data_types", {{"grad_accum_dtype", "fp8"}}}}),
                    Catch::Contains("data_types.grad_accum_dtype: \"fp8\""));
}

TEST_CASE(
    "grad accumulation: finite micro-batch gradients that overflow a binary16 accumulator skip the step",
    "[train][accumulation]") {
  // The check looks at the sums, not at each backward: binary32 gradients
  // scaled by 2^30 are finite, their binary16 cast is not (max 65504).
  json j = accum_config(1, 3);
  j["policy"] = "fp32";
  j["loss_scaler"] = {{"policy", "deepspeed"}, {"init_scale", 1073741824.0}};
  j["grad_accum_format"] = "binary16";
  bool micro_finite = true, sum_finite = true;
  RunOptions o;
  o.on_gradients = [&](std::int64_t, int micro, const std::vector<Parameter*>& params) {
    for (const Parameter* p : params) (micro >= 0 ? micro_finite : sum_finite) &= bool(p->grad.allFinite());
  };
  CHECK(column(run(parse_config(j), o).steps_csv, "skipped") == std::vector<std::string>{"1"});
  CHECK(micro_finite);
  CHECK(!sum_finite);
  j["grad_accum_format"] = "binary32";
  CHECK(column(run(parse_config(j), {}).steps_csv, "skipped") == std::vector<std::string>{"0"});
}
