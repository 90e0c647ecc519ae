// Cost of one emulated training step as a ratio to a native-float Eigen
// training step of the same 784-256-256-10 MLP (batch 128, SGD with
// momentum), measured in the same process, one thread each, in CPU time.
//
// A step's cost is the marginal one: run() for 2N steps minus run() for N
// steps, divided by N, so the set-up that every run pays once (synthetic
// data, building the model, meta.json) is not charged to the steps. Each
// time is the minimum over a few repetitions (the machine is shared; the
// minimum is the least disturbed). After the runs a markdown table gives
// every configuration's ratio.
#include <cmath>
#include <string>
#include <vector>

#include "bench_train_common.hpp"
#include "native_mlp.hpp"

namespace {

constexpr int kBatch = 128;
constexpr int kSteps = 20;   // N: the emulated runs take N and 2N steps
constexpr int kRepeats = 3;  // emulated: minimum over this many (N, 2N) pairs
constexpr int kNativeRepeats = 9;

rpsim::sim::train::Config emulated_config(const nlohmann::json& policy, bool shadow, int steps) {
  auto j = nlohmann::json::parse(R"({
    "name": "bench", "seed": 0,
    "model": {"type": "mlp", "hidden": [256, 256]},
    "data": {"name": "synthetic", "synthetic_test_size": 1},
    "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
    "batch_size": 128, "evaluate": false, "telemetry": {"histogram_steps": []}
  })");
  j["policy"] = policy;
  j["shadow"] = shadow;
  j["steps"] = steps;
  j["data"]["synthetic_train_size"] = kBatch * 2 * kSteps;  // the same data for N and 2N
  return rpsim::sim::config::parse_config(j);
}

void ratio_benchmark(benchmark::State& state, const std::string& label, const nlohmann::json& policy,
                     bool shadow) {
  bench_train::single_thread();
  for (auto _ : state) {
    const double native = bench_native::mlp_seconds_per_step(kBatch, kSteps, kNativeRepeats);
    const double emulated = bench_train::emulated_seconds_per_step(
        emulated_config(policy, shadow, kSteps), emulated_config(policy, shadow, 2 * kSteps), kRepeats);
    bench_train::record(state, label, native, emulated,
                        rpsim_bench_native_mlp_seconds(kBatch, kSteps, kNativeRepeats));
  }
}

void BM_fp16_amp_with_shadow(benchmark::State& state) {
  ratio_benchmark(state, "MLP `fp16-amp` with the FP64 shadow", "fp16-amp", true);
}
void BM_fp16_amp_no_shadow(benchmark::State& state) {
  ratio_benchmark(state, "MLP `fp16-amp` without the shadow", "fp16-amp", false);
}
void BM_fp32_with_shadow(benchmark::State& state) {
  ratio_benchmark(state, "MLP `fp32` with the shadow", "fp32", true);
}
void BM_bf16_pure_sr_no_shadow(benchmark::State& state) {
  ratio_benchmark(state, "MLP `bf16-pure` (stochastic updates) without the shadow", "bf16-pure", false);
}

// Every tensor in 16-bit fixed point with 14 fraction bits, every rounding
// stochastic (the fixed-point study's q16.14-sr run).
void BM_q16_14_sr_no_shadow(benchmark::State& state) {
  const auto q = nlohmann::json{{"compute", "q16.14"}, {"output", "q16.14"}};
  auto linear = q;
  linear["accumulation"] = "sequential:binary64:rne";
  const nlohmann::json policy = {{"name", "fp32"},          {"weights", "q16.14"},
                                 {"gradients", "q16.14"},   {"rounding", "sr"},
                                 {"update_rounding", "sr"}, {"ops", {{"linear", linear}, {"relu", q}}}};
  ratio_benchmark(state, "MLP q16.14, stochastic rounding, without the shadow", policy, false);
}

}  // namespace

BENCHMARK(BM_fp16_amp_with_shadow)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_fp16_amp_no_shadow)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_fp32_with_shadow)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_bf16_pure_sr_no_shadow)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_q16_14_sr_no_shadow)->Unit(benchmark::kMillisecond)->Iterations(1);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  bench_train::warm_allocator(emulated_config("fp32", true, 2));
  benchmark::RunSpecifiedBenchmarks();
  bench_train::print_table("training step (batch " + std::to_string(kBatch) + ", 1 thread, CPU time)");
  benchmark::Shutdown();
  return 0;
}
