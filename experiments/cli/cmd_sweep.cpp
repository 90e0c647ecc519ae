// rpsim sweep SWEEP.json: a grid of training runs, locally over the cores,
// as MPI ranks under mpirun, or as one Slurm array shard (--shard I/N), then
// one merged summary.csv.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "commands.hpp"
#include "rpsim/config/run_plan.hpp"
#include "rpsim/io/process.hpp"
#include "rpsim/io/progress.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/sweep/sweep.hpp"
#ifdef RPSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace rpsim::cli {
namespace {

struct Options {
  std::string file;
  std::string shard;  // "I/N"
  bool merge_only = false;
  int jobs = 0;
  std::string out;
};

std::pair<int, int> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument("");
    std::size_t p1 = 0, p2 = 0;
    const int i = std::stoi(text.substr(0, slash), &p1), n = std::stoi(text.substr(slash + 1), &p2);
    if (p1 != slash || p2 != text.size() - slash - 1 || n < 1 || i < 0 || i >= n)
      throw std::invalid_argument("");
    return {i, n};
  } catch (const std::exception&) {
    throw UsageError(fmt::format("--shard '{}': expected I/N with 0 <= I < N", text));
  }
}

// Launched by mpirun/srun with an MPI we were built against?
bool under_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

// Before any work: the runs, those already complete, the output and an
// estimate (each run's, see train/run_plan.hpp, spread over the jobs).
void print_plan(const sim::sweep::Sweep& s, const std::vector<const sim::sweep::Run*>& runs, int jobs) {
  std::size_t complete = 0;
  double seconds = 0;
  for (const auto* r : runs)
    if (sim::sweep::run_complete(s, *r))
      ++complete;
    else
      seconds += sim::config::plan_run(r->parsed).estimate_s;
  std::string grid;
  for (const auto& axis : s.axes)
    grid += fmt::format("{}{} ({} values)", grid.empty() ? "" : " x ", axis.key, axis.values.size());
  const std::size_t todo = runs.size() - complete;
  const int at_once = int(std::max<std::size_t>(1, std::min<std::size_t>(std::size_t(jobs), todo)));
  fmt::print("rpsim sweep {}: what will run\n", s.name);
  fmt::print("  grid       {}\n", grid);
  fmt::print("  runs       {} ({} already complete, kept), {} at once, one thread each\n", runs.size(),
             complete, at_once);
  fmt::print("  output     {}/<run-id>/, then {}/summary.csv\n", s.out_dir.string(), s.out_dir.string());
  fmt::print("  estimate   about {} (a line as each run ends)\n", io::format_duration(seconds / at_once));
  std::fflush(stdout);
}

#ifdef RPSIM_HAVE_MPI
int run_mpi(const sim::sweep::Sweep& s) {
  MPI_Init(nullptr, nullptr);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int failed = 0;
  std::string error;
  try {
    // Each rank takes runs index % size == rank: deterministic, and each run
    // is itself deterministic, so the merged files do not depend on size.
    sim::sweep::execute(s, sim::sweep::shard(s, rank, size), 1, stdout);
  } catch (const std::exception& e) {
    failed = 1;
    error = e.what();
  }
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!any_failed && rank == 0) {
    sim::sweep::merge(s);
    fmt::print("sweep {}: {} runs on {} MPI ranks, summary in {}\n", s.name, s.runs.size(), size,
               (s.out_dir / "summary.csv").string());
  }
  MPI_Finalize();
  if (failed) throw std::invalid_argument(error);
  return any_failed ? 1 : 0;
}
#endif

int run(const Options& o) {
  sim::sweep::Sweep s = sim::sweep::load(o.file);
  if (!o.out.empty()) s.out_dir = o.out;
  io::install_interrupt_handler();
  // Each job is a thread holding a whole run (its model, batch and FP64
  // shadow): --jobs 100000 started one per run of the grid at once, and a
  // negative count silently meant one per core. The thread bound of
  // --threads applies (past 4 per core runs only share the cores).
  if (o.jobs < 0) throw UsageError(fmt::format("--jobs {}: must be at least 1 (0: one per core)", o.jobs));
  io::check_threads(o.jobs, "--jobs", true);
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int jobs = o.jobs > 0 ? o.jobs : cores;

  if (o.merge_only) {
    sim::sweep::merge(s);
    fmt::print("sweep {}: merged {} runs into {}\n", s.name, s.runs.size(),
               (s.out_dir / "summary.csv").string());
    return 0;
  }

  std::string shard_text = o.shard;
  if (shard_text.empty()) {
    const char* id = std::getenv("SLURM_ARRAY_TASK_ID");
    const char* count = std::getenv("SLURM_ARRAY_TASK_COUNT");
    if (id && count) shard_text = fmt::format("{}/{}", id, count);
  }
  if (!shard_text.empty()) {
    const auto [i, n] = parse_shard(shard_text);
    const auto mine = sim::sweep::shard(s, i, n);
    print_plan(s, mine, jobs);
    const std::size_t ran = sim::sweep::execute(s, mine, jobs, stdout);
    if (io::interrupted()) {
      fmt::print(stderr, "sweep {}: interrupted; completed runs are kept, rerun to resume\n", s.name);
      return 130;
    }
    fmt::print("sweep {}: shard {}/{} ran {} of its {} runs; merge with --merge\n", s.name, i, n, ran,
               mine.size());
    return 0;
  }

  if (under_mpi()) {
#ifdef RPSIM_HAVE_MPI
    return run_mpi(s);
#else
    fmt::print(stderr, "rpsim was built without MPI: running the whole sweep in this process\n");
#endif
  }

  std::vector<const sim::sweep::Run*> all;
  for (const auto& r : s.runs) all.push_back(&r);
  print_plan(s, all, jobs);
  const std::size_t ran = sim::sweep::execute(s, all, jobs, stdout);
  if (io::interrupted()) {
    fmt::print(stderr, "sweep {}: interrupted; completed runs are kept, rerun to resume\n", s.name);
    return 130;
  }
  sim::sweep::merge(s);
  fmt::print("sweep {}: {} runs ({} run now, {} already complete), summary in {}\n", s.name, s.runs.size(),
             ran, s.runs.size() - ran, (s.out_dir / "summary.csv").string());
  return 0;
}

void add_sweep(CLI::App& app, Action& action) {
  auto* cmd =
      app.add_subcommand("sweep", "Run a grid of training runs (locally, under mpirun, or as Slurm shards)");
  auto o = std::make_shared<Options>();
  cmd->add_option("SWEEP", o->file, "sweep file (JSON: name, base, grid)")->required();
  cmd->add_option("--shard", o->shard,
                  "run one shard I/N (default: SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT)");
  cmd->add_flag("--merge", o->merge_only, "only build summary.csv from completed runs");
  cmd->add_option("-j,--jobs", o->jobs, "runs at once (default: the machine's cores)");
  cmd->add_option("--out", o->out, "output folder (default: the sweep's, results/<name>)");
  cmd->callback([o, &action] { action = [o] { return run(*o); }; });
}

const Registrar registered("sweep", add_sweep);

}  // namespace
}  // namespace rpsim::cli
