// bench_round's side-by-side table (issue #30): round_values against CPFloat's
// cpfloat() / cpfloatf() and against memcpy of the same bytes, on the same
// 10^7 inputs, one thread, in this process. Each case runs a few rounds of
// memcpy, rpsim, CPFloat back to back and reports the median of the
// per-round ratios with their range, so load on the shared machine that
// comes and goes between rounds does not land on one side only. Included by
// bench_round.cpp only (its inputs<>, output_buffer<> and Distribution).
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#if defined(RPSIM_HAVE_CPFLOAT)
extern "C" {
void* rpsim_bench_cpfloat_options(int precision, int emin, int emax, int has_inf, int saturate, int mode);
void rpsim_bench_cpfloat_free(void* options);
int rpsim_bench_cpfloat(double* out, const double* in, std::size_t n, void* options);
int rpsim_bench_cpfloatf(float* out, const float* in, std::size_t n, void* options);
int rpsim_bench_cpfloat_pcg(void);
long rpsim_bench_cpfloat_openmp_threshold(void);
}
#endif

namespace versus {

constexpr bool have_cpfloat =
#if defined(RPSIM_HAVE_CPFLOAT)
    true;
#else
    false;
#endif

// This thread's CPU time: the two cores are shared, and other processes'
// slices do not count (as Google Benchmark's CPU time above).
inline double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

template <class F>
double timed(F&& f) {
  const double t0 = cpu_seconds();
  f();
  return cpu_seconds() - t0;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

struct Row {
  std::string name;
  double rpsim_mps = 0, cpfloat_mps = 0;
  std::vector<double> vs_cpfloat, vs_memcpy;  // per round: rpsim speed / other speed
  std::size_t differ = 0;                     // elements where the two results differ (RNE, RTZ)
};

inline int mode_code(RoundingMode m) {
  return m == RoundingMode::nearest_even ? 0 : m == RoundingMode::toward_zero ? 1 : 2;
}

template <class T>
Row run_case(const Format& fmt, Distribution d, RoundingMode mode, std::size_t n, int rounds) {
  const auto& in = inputs<T>(d, n);
  auto& out = output_buffer<T>(n);
  std::vector<T> theirs(n, T(1));
  Row row;
  row.name = fmt.name + (std::is_same_v<T, double> ? " f64 " : " f32 ") + distribution_name(d) + " " +
             std::string(rounding_name(mode));
  ArrayOptions o;
  o.rounding.mode = mode;
  o.threads = 1;
  o.seed = 1;
  auto ours = [&] { round_values(fmt, std::span<const T>(in), std::span<T>(out), o); };
  auto copy = [&] { std::memcpy(out.data(), in.data(), n * sizeof(T)); };
  std::function<void()> cpf;
#if defined(RPSIM_HAVE_CPFLOAT)
  void* opts = rpsim_bench_cpfloat_options(fmt.man_bits + 1, fmt.emin, fmt.emax, fmt.has_inf() ? 1 : 0,
                                           fmt.overflow == Overflow::saturate ? 1 : 0, mode_code(mode));
  cpf = [&] {
    if constexpr (std::is_same_v<T, double>)
      rpsim_bench_cpfloat(theirs.data(), in.data(), n, opts);
    else
      rpsim_bench_cpfloatf(theirs.data(), in.data(), n, opts);
  };
#endif
  ours();  // warm: page faults, plans, caches
  if (cpf) cpf();
  std::vector<double> t_ours, t_cpf;
  for (int r = 0; r < rounds; ++r) {
    const double tm = timed(copy), to = timed(ours);
    t_ours.push_back(to);
    row.vs_memcpy.push_back(tm / to);
    if (cpf) {
      const double tc = timed(cpf);
      t_cpf.push_back(tc);
      row.vs_cpfloat.push_back(tc / to);
    }
  }
  row.rpsim_mps = double(n) / median(t_ours) / 1e6;
  if (cpf) {
    row.cpfloat_mps = double(n) / median(t_cpf) / 1e6;
    if (mode != RoundingMode::stochastic) {
      ours();
      // Bit for bit, but any NaN equals any NaN (the two pick different ones).
      for (std::size_t i = 0; i < n; ++i)
        row.differ +=
            std::memcmp(&out[i], &theirs[i], sizeof(T)) != 0 && !(out[i] != out[i] && theirs[i] != theirs[i]);
    }
  }
#if defined(RPSIM_HAVE_CPFLOAT)
  rpsim_bench_cpfloat_free(opts);
#endif
  return row;
}

inline std::string range(const std::vector<double>& v) {
  if (v.empty()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f (%.2f-%.2f)", median(v), *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()));
  return buf;
}

// filter: run only the cases whose name contains it ("" for all).
inline void print_table(std::size_t n, int rounds, const std::string& filter) {
#if defined(RPSIM_HAVE_CPFLOAT)
  // As CPFloat's Makefile builds it (bench_round.cmake); its OpenMP loop at one thread.
  const long threshold = rpsim_bench_cpfloat_openmp_threshold();
  std::printf(
      "\nround_values against CPFloat (%s, stochastic bits from %s, -O3 -march=native -std=gnu99 %s)\n",
      RPSIM_CPFLOAT_DIR, rpsim_bench_cpfloat_pcg() ? "PCG" : "rand()",
      threshold < 0
          ? "WITHOUT OpenMP: its sequential loop, not as its Makefile builds it"
          : ("-fopenmp: its OpenMP loop from " + std::to_string(threshold) + " values on, run by one thread")
                .c_str());
  std::printf("and memcpy,\n");
#else
  std::printf(
      "\nCPFloat comparison: NOT BUILT (configure with -DCPFLOAT_DIR=<a CPFloat checkout>, or CPFLOAT_DIR "
      "in\n"
      "the environment, to add it); round_values against memcpy only,\n");
#endif
  std::printf("%zu values, one thread, CPU time; ratio = median of %d rounds (min-max):\n\n", n, rounds);
  std::printf("| case | CPFloat M/s | rpsim M/s | rpsim / CPFloat | rpsim x memcpy | results differ |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  const RoundingMode modes[] = {RoundingMode::nearest_even, RoundingMode::toward_zero,
                                RoundingMode::stochastic};
  for (Distribution d : {Distribution::uniform, Distribution::wide}) {
    for (const char* name : {"binary16", "bfloat16", "e4m3", "e5m2"}) {
      for (RoundingMode mode : modes) {
        for (bool f64 : {true, false}) {
          const Format& fmt = format(name);
          const std::string label = std::string(name) + (f64 ? " f64 " : " f32 ") + distribution_name(d) +
                                    " " + std::string(rounding_name(mode));
          if (label.find(filter) == std::string::npos) continue;
          const Row row =
              f64 ? run_case<double>(fmt, d, mode, n, rounds) : run_case<float>(fmt, d, mode, n, rounds);
          const std::string differ =
              !have_cpfloat || mode == RoundingMode::stochastic ? "-" : std::to_string(row.differ);
          const std::string theirs = have_cpfloat ? std::to_string(int(row.cpfloat_mps + 0.5)) : "-";
          std::printf("| %s | %s | %.0f | %s | %s | %s |\n", row.name.c_str(), theirs.c_str(), row.rpsim_mps,
                      range(row.vs_cpfloat).c_str(), range(row.vs_memcpy).c_str(), differ.c_str());
          std::fflush(stdout);
        }
      }
    }
  }
}

}  // namespace versus
