// Cost of `rpsim gemm-check --infer` (infer_schedule) on cuBLAS H100 dumps,
// as a ratio to one whole-dump check of the preset it finds (check_gemm, one
// emulated GEMM of the same shape), in one process, one thread, CPU time.
// The dumps are ../shared/cublas-h100 (RPSIM_SHARED overrides ../shared); the
// benchmark says so and exits 0 when they are absent. Issue #30's aim: under a
// second on 128x128x4096.
//
//   build/bench/bench_gemm_infer [--rounds=3] [--filter=TEXT]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "rpsim/validation/gemm_infer.hpp"

namespace {

namespace fs = std::filesystem;
using rpsim::sim::AccumulationModel;

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

fs::path dump_dir() {
  if (const char* env = std::getenv("RPSIM_SHARED")) return fs::path(env) / "cublas-h100";
  return fs::path(RPSIM_SOURCE_DIR) / ".." / "shared" / "cublas-h100";
}

struct Timed {
  double infer_s = 1e30, check_s = 1e30;
  std::size_t exact = 0, candidates = 0;
  std::string found;
};

Timed time_dump(const fs::path& file, int rounds) {
  const auto dump = rpsim::sim::load_gemm_dump({file}, rpsim::sim::DumpFormat::numpy);
  Timed t;
  for (int r = 0; r < rounds; ++r) {
    double t0 = cpu_seconds();
    const auto res = rpsim::sim::infer_schedule(dump, rpsim::sim::InferOptions{});
    t.infer_s = std::min(t.infer_s, cpu_seconds() - t0);
    t.exact = res.exact.size();
    t.candidates = res.candidates;
    t.found = !res.presets.empty() ? res.presets.front() : !res.exact.empty() ? res.exact.front().spec : "-";
    // The baseline: one whole-dump check of what was found (the preset, else
    // the first reproducing model, else the best).
    const std::string spec = t.found != "-" ? t.found : res.best.empty() ? "" : res.best.front().spec;
    if (spec.empty()) continue;
    t0 = cpu_seconds();
    const auto check = rpsim::sim::check_gemm(dump, AccumulationModel::parse(spec), 0, 1);
    t.check_s = std::min(t.check_s, cpu_seconds() - t0);
    if (check.total == 0) std::fprintf(stderr, "bench_gemm_infer: empty check\n");
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3;
  std::string filter = "128x128x4096";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
      rounds = std::atoi(argv[i] + 9);
    } else if (std::strncmp(argv[i], "--filter=", 9) == 0) {
      filter = argv[i] + 9;
    } else {
      std::fprintf(stderr, "bench_gemm_infer: unknown argument %s (--rounds=N --filter=TEXT)\n", argv[i]);
      return 2;
    }
  }
  if (rounds < 1) {
    std::fprintf(stderr, "bench_gemm_infer: --rounds must be >= 1\n");
    return 2;
  }
  const fs::path dir = dump_dir();
  if (!fs::is_directory(dir)) {
    std::printf("bench_gemm_infer: NOT RUN: no cuBLAS dumps in %s (set RPSIM_SHARED)\n", dir.c_str());
    return 0;
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".npz" && e.path().filename().string().find(filter) != std::string::npos)
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::printf(
      "| dump (%s, 1 thread, CPU time, best of %d) | --infer s | one check s | x one check | "
      "candidates | reproducing | found |\n|---|---:|---:|---:|---:|---:|---|\n",
      dir.c_str(), rounds);
  double total = 0;
  for (const auto& f : files) {
    const Timed t = time_dump(f, rounds);
    total += t.infer_s;
    std::printf("| %s | %.3f | %.3f | %.1fx | %zu | %zu | %s |\n", f.filename().c_str(), t.infer_s, t.check_s,
                t.infer_s / t.check_s, t.candidates, t.exact, t.found.c_str());
    std::fflush(stdout);
  }
  std::printf("total --infer %.2f s over %zu dumps (aim: under 1 s each)\n", total, files.size());
  return 0;
}
