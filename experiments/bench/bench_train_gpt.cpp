// Cost of one emulated GPT training step as a ratio to a native-float Eigen
// GPT step of the same shapes, measured in the same process, one thread
// each, in CPU time (issue #16; bench_train.cpp is the MLP's version).
//
// The emulated side is rpsim's gpt model as experiments/configs/gpt-fp32.json
// sets it up (2 blocks, width 64, 4 heads, 32-token context, batch 8, tied
// output head, AdamW with warmup and cosine decay, clipping at 1), on the
// generated sentences of synthetic-text (no files), with evaluation and
// histograms off so only training steps are timed; a wider variant (width
// 128, context 64, batch 16) shows the cost once per-op overhead matters
// less. A step's cost is the marginal one (bench_train_common.hpp).
//
// The native side is the same network written directly in binary32 Eigen:
// the same matmul shapes and elementwise ops, forward, backward, clipping
// and AdamW, with none of the rounding, shadow or telemetry. Before timing,
// it is checked to learn (the loss falls over 50 steps on one fixed batch).
// It is compiled with the project's flags (x86-64 baseline: SSE2 Eigen
// kernels) while rpsim's rounding and GEMM kernels pick AVX2/AVX-512 at run
// time, so the ratio flatters rpsim: built with -mavx2 -mfma the native step
// took 3.1 ms instead of 5.6 (small) and 43 instead of 78 (wide). The table's
// last columns are therefore the same step built -march=native
// (native/native_steps.cpp, issue #30), the honest baseline.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_train_common.hpp"
#include "native_gpt.hpp"

namespace {

using bench_native::Batch;
using bench_native::NativeGpt;
using bench_native::Shape;
constexpr int kSteps = 20;   // N: the emulated runs take N and 2N steps
constexpr int kRepeats = 3;  // emulated: minimum over this many (N, 2N) pairs
constexpr int kNativeSteps = 10, kNativeRepeats = 9;

nlohmann::json gpt_json(const Shape& s) {
  auto j = nlohmann::json::parse(R"({
    "name": "bench", "seed": 0,
    "model": {"type": "gpt", "n_head": 4},
    "data": {"name": "synthetic-text", "test_limit": 32},
    "optimizer": {"type": "adamw", "lr": 0.002, "betas": [0.9, 0.99], "eps": 1e-8, "weight_decay": 0.1,
                  "warmup_steps": 20, "decay_steps": 200, "min_lr": 0.0002},
    "max_grad_norm": 1.0, "evaluate": false, "telemetry": {"histogram_steps": []}
  })");
  j["model"]["n_layer"] = s.layers;
  j["model"]["n_embd"] = s.width;
  j["model"]["block_size"] = s.context;
  j["batch_size"] = s.batch;
  return j;
}

rpsim::sim::train::Config emulated_config(const Shape& s, const std::string& policy, bool shadow, int steps) {
  auto j = gpt_json(s);
  j["policy"] = policy;
  j["shadow"] = shadow;
  j["steps"] = steps;
  return rpsim::sim::config::parse_config(j);
}

// The shape with synthetic-text's vocabulary, so both sides' embedding and
// head have the same size.
Shape shape(int width, int context, int batch) {
  Shape s{2, width, 4, context, batch, 0};
  const auto c = rpsim::sim::config::parse_config(gpt_json(s));
  s.vocabulary = int(rpsim::sim::train::load_data(c.data).vocabulary.size());
  return s;
}

void ratio_benchmark(benchmark::State& state, const std::string& label, const Shape& s,
                     const std::string& policy, bool shadow) {
  bench_train::single_thread();
  for (auto _ : state) {
    const double native = bench_native::gpt_seconds_per_step(s, kNativeSteps, kNativeRepeats);
    const double emulated = bench_train::emulated_seconds_per_step(
        emulated_config(s, policy, shadow, kSteps), emulated_config(s, policy, shadow, 2 * kSteps), kRepeats);
    bench_train::record(state, label, native, emulated,
                        rpsim_bench_native_gpt_seconds(s.layers, s.width, s.heads, s.context, s.batch,
                                                       s.vocabulary, kNativeSteps, kNativeRepeats));
  }
}

// The native step learns: one fixed batch, 50 steps, the loss must fall.
bool native_learns(const Shape& s) {
  NativeGpt net(s, 1);
  const Batch batch(s);
  const float first = net.step(batch.tokens, batch.targets);
  float last = first;
  for (int i = 1; i < 50; ++i) last = net.step(batch.tokens, batch.targets);
  std::printf("native GPT check (width %d): loss %.4f -> %.4f over 50 steps on one batch (ln V = %.4f)\n",
              s.width, first, last, std::log(float(s.vocabulary)));
  return std::isfinite(last) && last < first;
}

void register_rows(const char* name, const Shape& s) {
  const std::string tag = "gpt " + std::string(name) + " (n_embd " + std::to_string(s.width) + ", T " +
                          std::to_string(s.context) + ", batch " + std::to_string(s.batch) + ")";
  struct Case {
    const char *label, *policy;
    bool shadow;
  };
  for (const Case c : {Case{"`fp16-amp` with the FP64 shadow", "fp16-amp", true},
                       Case{"`fp16-amp` without the shadow", "fp16-amp", false},
                       Case{"`fp32` with the shadow", "fp32", true}}) {
    const std::string label = tag + " " + c.label;
    benchmark::RegisterBenchmark(
        ("BM_gpt_" + std::string(name) + "_" + c.policy + (c.shadow ? "_shadow" : "")).c_str(),
        [=](benchmark::State& st) { ratio_benchmark(st, label, s, c.policy, c.shadow); })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  bench_train::single_thread();
  const Shape small = shape(64, 32, 8), wide = shape(128, 64, 16);
  if (!native_learns(small) || !native_learns(wide)) {
    std::fprintf(stderr,
                 "bench_train_gpt: the native GPT step does not learn; its timings would mean nothing\n");
    return 1;
  }
  bench_train::warm_allocator(emulated_config(wide, "fp32", true, 2));
  register_rows("small", small);
  register_rows("wide", wide);
  benchmark::RunSpecifiedBenchmarks();
  bench_train::print_table("training step (1 thread, CPU time)");
  benchmark::Shutdown();
  return 0;
}
