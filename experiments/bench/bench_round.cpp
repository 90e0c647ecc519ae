// Array rounding throughput (rpsim::round_to_bits) against baselines measured
// in the same process: memcpy of the same input bytes, a naive loop over the
// scalar core (round_double), and the hardware conversion instructions
// (vcvtps2ph, vcvtneps2bf16, and vcvtpd2ps followed by them for binary64
// input: double rounding, so not exact, a speed reference only).
//
// Every benchmark reports items_per_second = values/s. After the runs a
// markdown table gives each one as a ratio to memcpy of the same input type
// and length, and the 2-thread / 1-thread ratios on 10^8 values. Then the
// table of issue #30: round_values against CPFloat (when built with
// CPFLOAT_DIR, see bench_round.cmake) and memcpy, bench_round_versus.hpp.
//   bench_round [--benchmark_filter=...] [--benchmark_out=file.json] [--no_ratios]
//   [--n=VALUES] [--scaling_n=VALUES] [--versus_only] [--no_versus] [--rounds=R] [--versus_filter=TEXT]
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "rpsim/formats/array.hpp"
#include "rpsim/formats/cpu_features.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

using namespace rpsim;

namespace {

std::size_t single_n = 10000000;                // 10^7: single-thread comparisons
std::size_t scaling_n = 100000000;              // 10^8: the 2-thread scaling check
constexpr std::size_t scalar_core_n = 1000000;  // the naive loop is slow; values/s is per value anyway

enum class Distribution { uniform, wide };

const char* distribution_name(Distribution d) {
  return d == Distribution::uniform ? "uniform" : "wide";
}

// Uniform in (-1, 1), or magnitudes 2^-30..2^20 (log-uniform) with random
// signs: many binary16 subnormals, underflows and overflows.
template <class T>
const std::vector<T>& inputs(Distribution d, std::size_t n) {
  static std::map<std::pair<int, std::size_t>, std::unique_ptr<std::vector<T>>> cache;
  auto& slot = cache[{int(d), n}];
  if (!slot) {
    slot = std::make_unique<std::vector<T>>(n);
    std::mt19937_64 gen(20240607 + int(d));
    std::uniform_real_distribution<double> unit(-1.0, 1.0), expo(-30.0, 20.0);
    for (auto& x : *slot) {
      if (d == Distribution::uniform) {
        x = T(unit(gen));
      } else {
        const double m = std::exp2(expo(gen));
        x = T((gen() & 1) ? -m : m);
      }
    }
  }
  return *slot;
}

template <class T>
std::vector<T>& output_buffer(std::size_t n) {
  static std::map<std::size_t, std::unique_ptr<std::vector<T>>> cache;
  auto& slot = cache[n];
  if (!slot) slot = std::make_unique<std::vector<T>>(n, T(1));  // touched: no page faults when timed
  return *slot;
}

template <class In>
const char* input_name() {
  return std::is_same_v<In, double> ? "f64" : "f32";
}

std::string memcpy_name(const char* in, std::size_t n) {
  return std::string("memcpy/") + in + "/n:" + std::to_string(n);
}

// Which memcpy run each benchmark is compared with.
std::map<std::string, std::string>& baseline_of() {
  static std::map<std::string, std::string> m;
  return m;
}

void finish(benchmark::State& state, std::size_t n) {
  state.SetItemsProcessed(std::int64_t(state.iterations()) * std::int64_t(n));
}

template <class In>
void bm_memcpy(benchmark::State& state, std::size_t n) {
  const auto& in = inputs<In>(Distribution::uniform, n);
  auto& out = output_buffer<In>(n);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), n * sizeof(In));
    benchmark::ClobberMemory();
  }
  finish(state, n);
}

template <class In, class Out>
void bm_round(benchmark::State& state, const Format* fmt, Distribution d, RoundingMode mode, int threads,
              std::size_t n, ArrayIsa isa) {
  const auto& in = inputs<In>(d, n);
  auto& out = output_buffer<Out>(n);
  ArrayOptions o;
  o.rounding.mode = mode;
  o.threads = threads;
  o.seed = 1;
  o.isa = isa;
  for (auto _ : state) {
    round_to_bits(*fmt, std::span<const In>(in), std::span<Out>(out), o);
    benchmark::ClobberMemory();
  }
  state.SetLabel(array_kernel_isa(isa));
  finish(state, n);
}

void bm_scalar_core(benchmark::State& state, const Format* fmt, Distribution d, RoundingMode mode) {
  const auto& in = inputs<double>(d, single_n);
  const std::size_t n = std::min(scalar_core_n, in.size());
  auto& out = output_buffer<std::uint16_t>(single_n);
  Rounding r;
  r.mode = mode;
  for (auto _ : state) {
    for (std::size_t i = 0; i < n; ++i) {
      r.random_bits = i * 0x9E3779B97F4A7C15ull;
      Flags f = 0;
      out[i] = std::uint16_t(round_double(*fmt, in[i], r, f));
    }
    benchmark::ClobberMemory();
  }
  finish(state, n);
}

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's avx512fintrin.h starts _mm512_cvtps_ph / _mm512_cvtpd_ps from _mm256_undefined_*(),
// which -Wmaybe-uninitialized reports (a known false positive); silenced for these baselines only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define RPSIM_HW_ATTR __attribute__((target("avx512f,avx512vl,avx512bf16,f16c")))
bool cpu_has_hw() {
  const CpuFeatures& c = cpu_features();
  return c.avx512f && c.avx512vl && c.avx512bf16 && c.f16c;
}

// binary32 -> binary16, round to nearest even (vcvtps2ph imm 0 | SAE).
RPSIM_HW_ATTR void hw_f32_to_f16(const float* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = std::uint16_t(_cvtss_sh(in[i], 0));
}

// binary32 -> bfloat16, vcvtneps2bf16 (RNE, DAZ/FTZ in hardware).
RPSIM_HW_ATTR void hw_f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(in + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), reinterpret_cast<const __m256i&>(h));
  }
  for (; i < n; ++i) out[i] = std::uint16_t(std::bit_cast<std::uint32_t>(in[i]) >> 16);
}

// binary64 -> binary32 (vcvtpd2ps) -> binary16: two roundings.
RPSIM_HW_ATTR void hw_f64_to_f16(const double* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 s = _mm512_cvtpd_ps(_mm512_loadu_pd(in + i));
    const __m128i h = _mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = std::uint16_t(_cvtss_sh(float(in[i]), 0));
}

// binary64 -> binary32 -> bfloat16: two roundings.
RPSIM_HW_ATTR void hw_f64_to_bf16(const double* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128bh h = _mm256_cvtneps_pbh(_mm512_cvtpd_ps(_mm512_loadu_pd(in + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), reinterpret_cast<const __m128i&>(h));
  }
  for (; i < n; ++i) out[i] = std::uint16_t(std::bit_cast<std::uint32_t>(float(in[i])) >> 16);
}
#pragma GCC diagnostic pop
#else
bool cpu_has_hw() {
  return false;
}
void hw_f32_to_f16(const float*, std::uint16_t*, std::size_t) {}
void hw_f32_to_bf16(const float*, std::uint16_t*, std::size_t) {}
void hw_f64_to_f16(const double*, std::uint16_t*, std::size_t) {}
void hw_f64_to_bf16(const double*, std::uint16_t*, std::size_t) {}
#endif

template <class In>
void bm_hardware(benchmark::State& state, void (*convert)(const In*, std::uint16_t*, std::size_t),
                 Distribution d) {
  if (!cpu_has_hw()) {
    state.SkipWithError("CPU lacks AVX-512F/VL, AVX512-BF16 or F16C");
    return;
  }
  const auto& in = inputs<In>(d, single_n);
  auto& out = output_buffer<std::uint16_t>(single_n);
  for (auto _ : state) {
    convert(in.data(), out.data(), single_n);
    benchmark::ClobberMemory();
  }
  finish(state, single_n);
}

// Single-thread runs are timed in CPU time: this machine's two cores are
// shared, and CPU time counts only our own cycles, so ratios within one run
// stay comparable. The scaling runs (n = scaling_n) need wall-clock time.
void add(const std::string& name, const std::string& baseline, auto fn, bool wall_clock = false) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kMillisecond);
  if (wall_clock) b->UseRealTime();
  baseline_of()[name] = baseline;
}

template <class Out>
void add_round(const Format& fmt, const char* in_name, Distribution d, RoundingMode mode, int threads,
               std::size_t n, ArrayIsa isa = ArrayIsa::best) {
  const std::string name = std::string("round/") + fmt.name + "/" + in_name + "/" + distribution_name(d) +
                           "/" + std::string(rounding_name(mode)) + "/threads:" + std::to_string(threads) +
                           (isa == ArrayIsa::best ? "" : std::string("/") + array_kernel_isa(isa)) +
                           "/n:" + std::to_string(n);
  const Format* f = &fmt;
  if (std::string(in_name) == "f64") {
    add(
        name, memcpy_name("f64", n),
        [=](benchmark::State& s) { bm_round<double, Out>(s, f, d, mode, threads, n, isa); }, n == scaling_n);
  } else {
    add(
        name, memcpy_name("f32", n),
        [=](benchmark::State& s) { bm_round<float, Out>(s, f, d, mode, threads, n, isa); }, n == scaling_n);
  }
}

void register_all() {
  const RoundingMode modes[] = {RoundingMode::nearest_even, RoundingMode::toward_zero,
                                RoundingMode::stochastic};
  const Distribution dists[] = {Distribution::uniform, Distribution::wide};
  add(memcpy_name("f64", single_n), "", [](benchmark::State& s) { bm_memcpy<double>(s, single_n); });
  add(memcpy_name("f32", single_n), "", [](benchmark::State& s) { bm_memcpy<float>(s, single_n); });
  for (Distribution d : dists) {
    for (RoundingMode mode : modes) {
      for (const char* name : {"binary16", "bfloat16"}) {
        add_round<std::uint16_t>(format(name), "f64", d, mode, 1, single_n);
        add_round<std::uint16_t>(format(name), "f32", d, mode, 1, single_n);
      }
      for (const char* name : {"e4m3", "e5m2"})
        add_round<std::uint8_t>(format(name), "f64", d, mode, 1, single_n);
      // Fixed point (Gupta et al. 2015's <2, 14>): its own kernel. The
      // benchmark keeps a pointer to the format: a static.
      static const Format q16_14 = parse_format("q16.14");
      add_round<std::uint16_t>(q16_14, "f64", d, mode, 1, single_n);
    }
  }
  // The narrower kernels on the headline case, to show what the dispatch buys.
  for (ArrayIsa isa : {ArrayIsa::avx2, ArrayIsa::portable})
    add_round<std::uint16_t>(formats::binary16(), "f64", Distribution::uniform, RoundingMode::nearest_even, 1,
                             single_n, isa);
  const std::string m64 = memcpy_name("f64", single_n), m32 = memcpy_name("f32", single_n);
  for (Distribution d : dists) {
    const std::string suffix = std::string("/") + distribution_name(d);
    add("scalar_core/binary16/f64" + suffix + "/rne/n:" + std::to_string(scalar_core_n), m64,
        [=](benchmark::State& s) { bm_scalar_core(s, &formats::binary16(), d, RoundingMode::nearest_even); });
    add("scalar_core/binary16/f64" + suffix + "/sr/n:" + std::to_string(scalar_core_n), m64,
        [=](benchmark::State& s) { bm_scalar_core(s, &formats::binary16(), d, RoundingMode::stochastic); });
    // What fixed point ran on before its kernel.
    static const Format q16_14 = parse_format("q16.14");  // (a static: see above)
    add("scalar_core/q16.14/f64" + suffix + "/sr/n:" + std::to_string(scalar_core_n), m64,
        [=](benchmark::State& s) { bm_scalar_core(s, &q16_14, d, RoundingMode::stochastic); });
    add("hw_vcvtps2ph/binary16/f32" + suffix + "/rne", m32,
        [=](benchmark::State& s) { bm_hardware<float>(s, hw_f32_to_f16, d); });
    add("hw_vcvtneps2bf16/bfloat16/f32" + suffix + "/rne", m32,
        [=](benchmark::State& s) { bm_hardware<float>(s, hw_f32_to_bf16, d); });
    add("hw_vcvtpd2ps+vcvtps2ph/binary16/f64" + suffix + "/rne(double rounding)", m64,
        [=](benchmark::State& s) { bm_hardware<double>(s, hw_f64_to_f16, d); });
    add("hw_vcvtpd2ps+vcvtneps2bf16/bfloat16/f64" + suffix + "/rne(double rounding)", m64,
        [=](benchmark::State& s) { bm_hardware<double>(s, hw_f64_to_bf16, d); });
  }
  // Scaling: 1 and 2 threads on 10^8 values.
  add(
      memcpy_name("f64", scaling_n), "", [](benchmark::State& s) { bm_memcpy<double>(s, scaling_n); }, true);
  for (int threads : {1, 2}) {
    for (RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::stochastic}) {
      add_round<std::uint16_t>(formats::binary16(), "f64", Distribution::uniform, mode, threads, scaling_n);
      add_round<std::uint16_t>(formats::bfloat16(), "f64", Distribution::wide, mode, threads, scaling_n);
    }
  }
}

// Keeps every run for the ratio table, and prints as usual.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> values_per_second;
  std::vector<std::string> order;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      const auto it = r.counters.find("items_per_second");
      if (it == r.counters.end()) continue;
      const std::string name = r.run_name.str();
      if (!values_per_second.count(name)) order.push_back(name);
      values_per_second[name] = double(it->second);
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

std::string strip_suffix(const std::string& name) {
  // Google Benchmark appends "/real_time" to wall-clock runs.
  const std::string tail = "/real_time";
  return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0
             ? name.substr(0, name.size() - tail.size())
             : name;
}

void print_ratios(const CollectingReporter& rep) {
  std::map<std::string, double> v;
  for (const auto& [name, value] : rep.values_per_second) v[strip_suffix(name)] = value;
  std::printf("\n| benchmark | values/s (M) | ratio to memcpy of the same input |\n|---|---:|---:|\n");
  for (const auto& full : rep.order) {
    const std::string name = strip_suffix(full);
    const auto b = baseline_of().find(name);
    std::string ratio = "baseline";
    if (b != baseline_of().end() && !b->second.empty() && v.count(b->second)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2fx", v[name] / v[b->second]);
      ratio = buf;
    }
    std::printf("| %s | %.0f | %s |\n", name.c_str(), v[name] / 1e6, ratio.c_str());
  }
  bool header = false;
  for (const auto& [name, value] : v) {
    const auto pos = name.find("/threads:2/");
    if (pos == std::string::npos) continue;
    std::string one = name;
    one.replace(pos, 11, "/threads:1/");
    if (!v.count(one)) continue;
    if (!header) {
      std::printf("\n| scaling | 2 threads / 1 thread |\n|---|---:|\n");
      header = true;
    }
    std::printf("| %s | %.2fx |\n", name.c_str(), value / v[one]);
  }
}

}  // namespace

#include "bench_round_versus.hpp"

int main(int argc, char** argv) {
  bool ratios = true, versus_table = true, benchmarks = true;
  int rounds = 5;
  std::string versus_filter;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no_ratios") {
      ratios = false;
    } else if (a == "--no_versus") {
      versus_table = false;
    } else if (a == "--versus_only") {
      benchmarks = false;
    } else if (a.rfind("--versus_filter=", 0) == 0) {
      versus_filter = a.substr(16);
    } else if (a.rfind("--rounds=", 0) == 0) {
      rounds = std::max(1, std::stoi(a.substr(9)));
    } else if (a.rfind("--n=", 0) == 0) {
      single_n = std::stoull(a.substr(4));
    } else if (a.rfind("--scaling_n=", 0) == 0) {
      scaling_n = std::stoull(a.substr(12));
    } else {
      args.push_back(argv[i]);
    }
  }
  int nargs = int(args.size());
  benchmark::Initialize(&nargs, args.data());
  if (benchmark::ReportUnrecognizedArguments(nargs, args.data())) return 2;
  std::printf("array kernel: %s\n", array_kernel_isa());
  if (benchmarks) {
    register_all();
    CollectingReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    if (ratios) print_ratios(reporter);
  }
  if (versus_table) versus::print_table(single_n, rounds, versus_filter);
  benchmark::Shutdown();
  return 0;
}
