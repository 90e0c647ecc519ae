// `rpsim study NAME [--quick] [--out DIR]`: runs one study of the suite (or
// `all` of them) and writes results/<study>/*.csv + meta.json.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/io/run_info.hpp"
#include "rpsim/study/study.hpp"

namespace rpsim::cli {

namespace {

namespace fs = std::filesystem;
namespace st = rpsim::sim::study;

// The config of a study: --config, else study-NAME.json in $RPSIM_CONFIG_DIR,
// ./experiments/configs, or the source tree this binary was built from.
fs::path config_path(const std::string& study, const std::string& config_dir) {
  const std::string file = "study-" + study + ".json";
  if (!config_dir.empty()) return fs::path(config_dir) / file;
  if (const char* env = std::getenv("RPSIM_CONFIG_DIR")) return fs::path(env) / file;
  const fs::path local = fs::path("experiments") / "configs" / file;
  if (fs::exists(local)) return local;
  const fs::path source = fs::path(io::source_dir()) / "experiments" / "configs" / file;
  if (fs::exists(source)) return source;
  throw UsageError(fmt::format("no config for study '{}': looked for {} and {} (use --config FILE)", study,
                               local.string(), source.string()));
}

int run_one(const st::StudyInfo& info, bool quick, const fs::path& out_dir, const fs::path& config) {
  st::StudyOptions options;
  options.quick = quick;
  options.out_dir = out_dir;
  options.config = st::StudyConfig::load(config, quick);
  // A user's config may only set fields the study's own config has: a typo
  // would otherwise be silently ignored.
  fs::path reference;
  try {
    reference = config_path(info.name, "");
  } catch (const UsageError&) {
  }
  // The fields as loaded: a config's "extends" is resolved by then.
  if (!reference.empty() && fs::exists(reference) && fs::absolute(reference) != fs::absolute(config))
    options.config.check_fields(st::StudyConfig::load(reference, false));
  fmt::print(
      "study {}{}: {}\n  config {}, output {}/ (tables written at the end; an interrupt writes none)\n",
      info.name, quick ? " (quick)" : "", info.question, config.string(), out_dir.string());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const st::StudyOutput out = st::run_study(info, options);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& line : out.findings) fmt::print("  {}\n", line);
  fmt::print("  wrote {} tables + meta.json to {} in {:.1f} s\n", out.tables.size(), out_dir.string(), wall);
  return 0;
}

void add_study(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("study", "Run a study of the suite: results/<study>/*.csv + meta.json");
  auto name = std::make_shared<std::string>();
  auto quick = std::make_shared<bool>(false);
  auto out = std::make_shared<std::string>();
  auto config = std::make_shared<std::string>();
  auto config_dir = std::make_shared<std::string>();
  cmd->add_option("NAME", *name, "study name, `all` (the default suite) or `list`")->required();
  cmd->add_flag("--quick", *quick, "the small configuration (under a minute; what the tests run)");
  cmd->add_option("--out", *out,
                  "output folder (default results/<study>; with `all`, the parent of one folder per study)");
  cmd->add_option("--config", *config, "config file (default experiments/configs/study-NAME.json)");
  cmd->add_option("--config-dir", *config_dir, "folder of study-NAME.json files");
  cmd->callback([=, &action] {
    action = [=]() -> int {
      if (*name == "list") {
        for (const auto& s : st::studies()) fmt::print("{:14} {}\n", s.name, s.question);
        return 0;
      }
      io::install_interrupt_handler();
      if (*name == "all") {
        if (!config->empty())
          throw UsageError("--config names one study's file; with `all` use --config-dir");
        const fs::path parent = out->empty() ? fs::path("results") : fs::path(*out);
        const auto start = std::chrono::steady_clock::now();
        for (const auto& s : st::studies()) {
          if (io::interrupted()) {
            fmt::print(stderr, "rpsim: interrupted before study {}\n", s.name);
            return 130;
          }
          run_one(s, *quick, parent / s.name, config_path(s.name, *config_dir));
        }
        fmt::print("all studies: {:.1f} s\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        return 0;
      }
      const st::StudyInfo& info = st::find_study(*name);
      const fs::path dir = out->empty() ? fs::path("results") / info.name : fs::path(*out);
      const fs::path cfg = config->empty() ? config_path(info.name, *config_dir) : fs::path(*config);
      return run_one(info, *quick, dir, cfg);
    };
  });
}

const Registrar registered("study", add_study);

}  // namespace

}  // namespace rpsim::cli
