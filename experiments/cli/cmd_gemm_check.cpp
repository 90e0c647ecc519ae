// rpsim gemm-check FILE... --model MODEL | --infer: a GEMM dumped from a GPU
// (A, B, D and optionally C) checked bit for bit against an accumulation
// model, or the kernel schedules that reproduce it searched for. The work is
// in sim/validation (gemm_check.hpp, gemm_infer.hpp); this file parses and
// prints.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "commands.hpp"
#include "rpsim/io/npy.hpp"
#include "rpsim/io/process.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/validation/gemm_check.hpp"
#include "rpsim/validation/gemm_infer.hpp"
#include "rpsim/validation/gemm_manifest.hpp"

namespace rpsim::cli {

namespace {

struct Opts {
  std::vector<std::string> files;
  std::string model, format = "numpy";
  bool infer = false;
  std::size_t show = 10, top = 5;
  int threads = 1;
};

std::string ulps_text(double u) {
  return std::isfinite(u) ? fmt::format("{:.4g}", u) : "inf";
}

void print_dump(const sim::GemmDump& d) {
  fmt::print("dump: {} (M={} N={} K={}, D stored as {}{})\n", d.source, d.a.rows(), d.b.cols(), d.a.cols(),
             d.d_dtype, d.c ? ", C given" : "");
}

int check(const Opts& o, const sim::GemmDump& dump) {
  sim::AccumulationModel model;
  try {
    model = sim::AccumulationModel::parse(o.model);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--model: {}", e.what()));
  }
  sim::check_dump_formats(dump, model);
  const auto r = sim::check_gemm(dump, model, o.show, o.threads);
  const Format& out = model.output_format();
  fmt::print("model: {}\n", r.model);
  if (!r.schedule.empty())
    fmt::print("schedule for {}x{}x{}: {}\n", dump.a.rows(), dump.b.cols(), dump.a.cols(), r.schedule);
  if (!r.schedule_source.empty()) fmt::print("schedule source: {}\n", r.schedule_source);
  fmt::print("bit-exact: {}/{} elements ({:.2f}%)\n", r.passed, r.total,
             r.total ? 100.0 * static_cast<double>(r.passed) / static_cast<double>(r.total) : 100.0);
  fmt::print("max_diff_ulps ({}): {}\nmean_diff_ulps ({}): {}\n", out.name, ulps_text(r.max_ulps), out.name,
             ulps_text(r.mean_ulps));
  for (const auto& m : r.first)
    fmt::print("  mismatch row {} col {}: dump {} model {} ({} ulps of {})\n", m.row, m.col, m.expected,
               m.got, ulps_text(m.ulps), out.name);
  fmt::print("{} passed, {} failed\n", r.passed, r.total - r.passed);
  return r.passed == r.total ? 0 : 1;
}

int infer(const Opts& o, const sim::GemmDump& dump) {
  sim::InferOptions opts;
  opts.top = o.top;
  opts.threads = o.threads;
  const auto r = sim::infer_schedule(dump, opts);
  fmt::print("values: A and B {} (instruction input {}), D {}\n", r.stored.name, r.input.name, r.output.name);
  fmt::print("candidates screened: {} kernel schedules and plain models (on {} elements first)\n",
             r.candidates, opts.sample);
  // Ranked by bit-exact elements, then max and mean ulps of the output format.
  auto print = [&r](const sim::InferredSchedule& s) {
    fmt::print("  {}/{}  max {} mean {} ulps of {}  {}{}\n", s.passed, s.total, ulps_text(s.max_ulps),
               ulps_text(s.mean_ulps), r.output.name, s.spec, s.note.empty() ? "" : " (" + s.note + ")");
    if (!s.family.empty()) fmt::print("           family: {}\n", s.family);
    if (!s.equivalents.empty()) fmt::print("           same chunks as: {}\n", fmt::join(s.equivalents, "; "));
  };
  if (!r.exact.empty()) {
    fmt::print("models that reproduce every element:\n");
    for (const auto& s : r.exact) print(s);
    if (r.truncated) fmt::print("  (more not listed)\n");
  } else {
    fmt::print("no model reproduces every element; the best:\n");
    for (const auto& s : r.best) print(s);
  }
  for (const auto& p : r.presets) fmt::print("named preset reproducing it: {}\n", p);
  const std::size_t total = static_cast<std::size_t>(dump.d.size());
  const std::size_t best = r.exact.empty() ? (r.best.empty() ? 0 : r.best.front().passed) : total;
  fmt::print("{} passed, {} failed\n", best, total - best);
  return r.exact.empty() ? 1 : 0;
}

// A capture_gemms directory (or its manifest.json): every GEMM in it, one table.
// SIGINT stops between GEMMs (issue #36: it used to end the search with
// nothing printed): the rows done are printed, then a line saying so, exit
// 130.
int check_manifest(const Opts& o) {
  io::install_interrupt_handler();
  const auto stop = [] { return io::interrupted().load(); };
  const auto interrupted = [](std::size_t done, std::size_t total, const char* what) {
    fmt::print(stderr, "rpsim gemm-check: interrupted after {} of {} {}\n", done, total, what);
    return 130;
  };
  try {
    const auto manifest = sim::load_gemm_manifest(o.files.front());
    if (o.infer) {
      sim::InferOptions opts;
      opts.top = o.top;
      opts.threads = o.threads;
      const auto r = sim::infer_gemm_manifest(
          manifest, opts,
          [](const std::string& line) {
            fmt::print("{}", line);
            std::fflush(stdout);
          },
          stop);
      if (r.interrupted) return interrupted(r.searched, r.calls, "calls");
      return r.failed ? 1 : 0;
    }
    const auto report = sim::check_gemm_manifest(
        manifest, o.model.empty() ? std::vector<std::string>{} : std::vector<std::string>{o.model}, o.show,
        o.threads, stop);
    fmt::print("{}", report.table());
    std::fflush(stdout);
    if (report.interrupted) return interrupted(report.checked, report.gemms, "GEMMs");
    return report.failed ? 1 : 0;
  } catch (const sim::GemmDumpError& e) {
    throw UsageError(e.what());
  }
}

void add_gemm_check(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "gemm-check",
      "Check a GEMM dumped from a GPU (A, B, D[, C] as .npz/.npy) bit for bit against a model, "
      "or --infer the kernel schedule that reproduces it");
  auto o = std::make_shared<Opts>();
  cmd->add_option("FILE", o->files,
                  "a capture_gemms directory (manifest.json), an .npz holding A B D [C], or .npy / text "
                  "files named A.npy, run_B.npy ... (the stem's "
                  "last letter names the array)")
      ->required();
  auto* model =
      cmd->add_option("--model", o->model,
                      "accumulation model: a kernel preset (cublas:h100:IN:OUT[:rpr=0|1]), a schedule "
                      "(kernel:GPU:IN:OUT:FIELD=VALUE...) or any rpsim gemm model");
  auto* inf = cmd->add_flag(
      "--infer", o->infer,
      "search the kernel schedules and plain accumulation models (exact, sequential, fma, pairwise, "
      "blocked, Kahan; both K orders) that reproduce the dump bit for bit, ranked");
  model->excludes(inf);
  cmd->add_option("--format", o->format, "numpy (.npz / .npy) or text (rows of numbers)")
      ->check(CLI::IsMember({"numpy", "text"}))
      ->capture_default_str();
  cmd->add_option("--show", o->show, "mismatches to print")->check(non_negative())->capture_default_str();
  cmd->add_option("--top", o->top, "--infer: schedules to print when none reproduces the dump")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "OpenMP threads (results do not depend on it)")
      ->capture_default_str();
  cmd->callback([o, &action] {
    action = [o]() -> int {
      io::check_threads(o->threads, "--threads", false);
      if (o->files.size() == 1 && (std::filesystem::is_directory(o->files[0]) ||
                                   std::filesystem::path(o->files[0]).filename() == "manifest.json"))
        return check_manifest(*o);
      if (o->model.empty() && !o->infer) throw UsageError("gemm-check needs --model MODEL or --infer");
      std::vector<std::filesystem::path> files(o->files.begin(), o->files.end());
      sim::GemmDump dump;
      try {
        dump =
            sim::load_gemm_dump(files, o->format == "text" ? sim::DumpFormat::text : sim::DumpFormat::numpy);
      } catch (const io::ArrayFileError& e) {
        throw UsageError(e.what());
      }
      print_dump(dump);
      return o->infer ? infer(*o, dump) : check(*o, dump);
    };
  });
}

const Registrar registered("gemm-check", add_gemm_check);

}  // namespace

}  // namespace rpsim::cli
