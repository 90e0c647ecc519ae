// rpsim train CONFIG.json [--set key=value ...] [--out DIR]: one training run
// under a precision policy with its FP64 shadow (sim/train/trainer.hpp). It
// says what will run before any work, reports progress at least every 10 s,
// and on Ctrl-C keeps the steps done in OUT-partial/ (meta.json "partial")
// with no OUT folder; a later complete run removes that OUT-partial/.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "commands.hpp"
#include "rpsim/config/config.hpp"
#include "rpsim/config/config_loader.hpp"
#include "rpsim/config/framework_config.hpp"
#include "rpsim/config/policy_json.hpp"
#include "rpsim/config/run_plan.hpp"
#include "rpsim/io/process.hpp"
#include "rpsim/io/progress.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/trainer.hpp"

namespace rpsim::cli {

namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::string file, out;
  std::vector<std::string> sets;
  CLI::Option* out_option = nullptr;
  int threads = 0;
  bool quiet = false, plan = false;
};

void print_results(const sim::train::Config& config, const sim::train::RunResult& result,
                   const fs::path& dir) {
  if (result.synthetic_data) fmt::print("WARNING: {}\n", result.data_description);
  fmt::print("{}: policy {}, {} steps ({} skipped), final loss {:.6g} nats, final loss scale {:g}\n",
             config.name, config.policy.name, result.steps_done, result.skipped_steps, result.final_loss,
             result.final_loss_scale);
  for (const auto& e : result.evaluations) {
    fmt::print("{} (step {}): test accuracy {:.2f}%", e.label(), e.step, e.test_accuracy_percent);
    if (config.shadow) fmt::print(", fp64 shadow {:.2f}%", e.shadow_test_accuracy_percent);
    fmt::print("\n");
  }
  const auto& m = result.memory;
  fmt::print("memory (bytes): weights {} master {} activations {} gradients {} optimizer state {} total {}\n",
             m.weights, m.master_weights, m.activations, m.gradients, m.optimizer_state, m.total());
  fmt::print("wrote {}/steps.csv, histograms.csv, evaluations.csv, meta.json\n", dir.string());
}

// What a run writes: steps.csv about 300 bytes a step (282 measured on
// mlp-fp32), a histogram step's rows up to 64 KB (6.6 KB on the mlp), and
// meta.json. A folder without that room is refused before the steps are
// computed: on a full disk the finished run's files failed to write and the
// steps were lost.
void check_disk_room(const sim::train::Config& config, const sim::config::RunPlan& plan,
                     const fs::path& out) {
  const double need = 300.0 * double(plan.total_steps) + 64e3 * double(config.histogram_steps.size() + 1);
  std::error_code ec;
  fs::path where = fs::absolute(out, ec);  // the folder may not exist yet: its nearest existing parent
  while (!ec && !fs::exists(where, ec) && where.has_parent_path() && where != where.parent_path())
    where = where.parent_path();
  const fs::space_info space = fs::space(where, ec);
  if (!ec && double(space.available) < need)
    throw UsageError(
        fmt::format("{}: the run writes about {:.3g} MB ({} steps), the folder's disk has {:.3g} MB free",
                    out.string(), need / 1e6, plan.total_steps, double(space.available) / 1e6));
}

// The output folder, created and written to before the disk is asked for
// room: a folder that cannot be created (--out /proc/x) was reported as a
// disk with "0 MB free". Created here, it is removed again when the room is
// short, so a refused run leaves nothing behind.
void prepare_out(const sim::train::Config& config, const sim::config::RunPlan& plan, const fs::path& out) {
  std::error_code ec;
  fs::path created;  // the outermost folder this creates
  for (fs::path p = fs::absolute(out, ec); !ec && !fs::exists(p, ec) && p != p.parent_path();
       p = p.parent_path())
    created = p;
  try {
    io::ensure_writable_dir(out);
  } catch (const io::IoError& e) {
    throw UsageError(e.what());  // "cannot create the output folder 'OUT' (why)"
  }
  try {
    check_disk_room(config, plan, out);
  } catch (const UsageError&) {
    if (!created.empty()) fs::remove_all(created, ec);
    throw;
  }
}

int train(const TrainArgs& a) {
  sim::config::LoadedConfig loaded;
  sim::train::Config config;
  try {
    loaded = sim::config::read_config_file(a.file, a.sets);
    config = loaded.parse();
  } catch (const sim::train::ConfigError& e) {
    throw UsageError(e.what());
  }
  io::check_threads(a.threads, "--threads", true);
  if (a.out_option->count() > 0 && a.out.empty()) throw UsageError("--out '': an empty folder name");
  sim::train::RunOptions options;
  options.out_dir = a.out.empty() ? fs::path("results") / config.name : fs::path(a.out);
  options.partial_out_dir = options.out_dir.string() + "-partial";
  // The plan checks the batch against the data and the memory against the
  // machine's (ConfigError: exit 2) before any folder is created.
  const sim::config::RunPlan plan = sim::config::plan_run(config);
  if (!a.plan) prepare_out(config, plan, options.out_dir);  // --plan creates nothing
  fmt::print("rpsim train {}: what will run\n{}", config.name,
             sim::config::describe_run(loaded, config, plan, options.out_dir.string()));
  std::fflush(stdout);
  if (a.plan) return 0;
  options.threads = a.threads;
  options.data = plan.data;  // a text set read once, by the plan
  options.progress = a.quiet ? nullptr : stderr;
  options.progress_is_terminal = isatty(fileno(stderr));
  auto line = std::make_shared<io::ProgressLine>(options.progress, options.progress_is_terminal,
                                                 "train " + config.name, "steps");
  options.on_step = [line](const sim::train::StepReport& r) {
    line->update(r.step, r.total_steps, fmt::format("loss {:.4f}, scale {:g}", r.loss, r.loss_scale));
  };
  io::install_interrupt_handler();
  const auto result = sim::train::run(config, options);
  line->finish();
  if (result.interrupted) {
    fmt::print(stderr, "rpsim train: interrupted at step {} of {}; ", result.steps_done, plan.total_steps);
    if (result.steps_done > 0)
      fmt::print(stderr, "the {} steps done are in {}/ (meta.json: \"partial\": true); nothing in {}\n",
                 result.steps_done, options.partial_out_dir.string(), options.out_dir.string());
    else
      fmt::print(stderr, "no step was done, nothing written\n");
    return 130;
  }
  print_results(config, result, options.out_dir);
  return 0;
}

// The keys of rpsim's vocabulary, from the key tables (as their check reads them).
std::string keys_help() {
  std::string text = "Config keys (rpsim's vocabulary; `extends`: FILE merges this file onto a base):\n";
  auto rows = sim::config::config_key_help();
  const auto policy = sim::config::policy_key_help();
  rows.insert(rows.end(), policy.begin(), policy.end());
  for (const auto& k : rows) text += fmt::format("  {:<34} {:<24} {}\n", k.path, k.type, k.help);
  return text;
}

void add_train(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("train", "Train a network under a precision policy beside an FP64 shadow");
  auto a = std::make_shared<TrainArgs>();
  cmd->add_option("CONFIG", a->file,
                  "configuration JSON: rpsim's own or a DeepSpeed config (see experiments/configs/)")
      ->required();
  cmd->add_option("--set", a->sets,
                  "override a key, in the vocabulary of the config file: --set optimizer.lr=0.1, "
                  "--set policy=bf16-amp, --set fp16.initial_scale_power=10 (DeepSpeed)");
  a->out_option = cmd->add_option("--out", a->out, "output directory (default results/<name>)");
  cmd->add_option("--threads", a->threads, "OpenMP threads (0: default; at most 4 per core)");
  cmd->add_flag("--quiet", a->quiet, "no progress output");
  cmd->add_flag("--plan", a->plan, "print what would run (and the time estimate), then stop");
  cmd->footer(keys_help() + "\n" + sim::config::framework_vocabularies_help());
  cmd->callback([a, &action] { action = [a] { return train(*a); }; });
}

const Registrar registered("train", add_train);
}  // namespace

}  // namespace rpsim::cli
