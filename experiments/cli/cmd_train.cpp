// rpsim train CONFIG.json [--set key=value ...] [--out DIR]: one training run
// under a precision policy with its FP64 shadow (sim/train/trainer.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "commands.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/framework_config.hpp"
#include "rpsim/train/trainer.hpp"

namespace rpsim::cli {

namespace {

void add_train(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("train", "Train a network under a precision policy beside an FP64 shadow");
  auto file = std::make_shared<std::string>();
  auto sets = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto threads = std::make_shared<int>(0);
  auto quiet = std::make_shared<bool>(false);
  cmd->add_option("CONFIG", *file, "configuration JSON (see experiments/configs/)")->required();
  cmd->add_option("--set", *sets, "override a key: --set optimizer.lr=0.1 --set policy=bf16-amp");
  cmd->add_option("--out", *out, "output directory (default results/<name>)");
  cmd->add_option("--threads", *threads, "OpenMP threads (0: default)");
  cmd->add_flag("--quiet", *quiet, "no progress output");
  cmd->callback([=, &action] {
    action = [=]() -> int {
      std::ifstream in(*file);
      if (!in) throw UsageError(fmt::format("cannot open config file '{}'", *file));
      std::stringstream text;
      text << in.rdbuf();
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(text.str());
      } catch (const nlohmann::json::exception& e) {
        // parse_error, and out_of_range for a number such as 1e999.
        throw UsageError(fmt::format("{}: not valid JSON: {}", *file, e.what()));
      }
      sim::train::Config config;
      try {
        // A DeepSpeed config, Keras policy names, GradScaler keywords and TE
        // recipe fields become rpsim's own config first; --set applies after.
        const sim::train::Translation t = sim::train::translate_framework_config(j, *file);
        j = t.config;
        if (t.kind == "deepspeed") j["name"] = std::filesystem::path(*file).stem().string();
        if (!t.ignored.empty())
          fmt::print("{}: ignored (no meaning in a simulator): {}\n", *file, fmt::join(t.ignored, ", "));
        for (const auto& n : t.notes) fmt::print("{}: {}\n", *file, n);
        for (const auto& s : *sets) sim::train::apply_override(j, s);
        if (!j.contains("name") && j.is_object()) j["name"] = std::filesystem::path(*file).stem().string();
        config = sim::train::parse_config(j);
      } catch (const sim::train::ConfigError& e) {
        throw UsageError(fmt::format("{}: {}", *file, e.what()));
      }
      if (*threads < 0) throw UsageError(fmt::format("--threads {}: must be >= 0", *threads));
      sim::train::RunOptions options;
      options.out_dir =
          out->empty() ? std::filesystem::path("results") / config.name : std::filesystem::path(*out);
      try {
        io::ensure_writable_dir(options.out_dir);
      } catch (const io::IoError& e) {
        throw UsageError(e.what());
      }
      options.threads = *threads;
      options.progress = *quiet ? nullptr : stderr;
      options.progress_is_terminal = isatty(fileno(stderr));
      io::install_interrupt_handler();
      const auto result = sim::train::run(config, options);
      if (result.interrupted) {
        fmt::print(stderr, "rpsim train: stopped by interrupt after {} steps; nothing written to {}\n",
                   result.steps_done, options.out_dir.string());
        return 130;
      }
      if (result.synthetic_data) fmt::print("WARNING: {}\n", result.data_description);
      fmt::print("{}: policy {}, {} steps ({} skipped), final loss {:.6g}, final loss scale {:g}\n",
                 config.name, config.policy.name, result.steps_done, result.skipped_steps, result.final_loss,
                 result.final_loss_scale);
      for (const auto& e : result.evaluations) {
        fmt::print("epoch {} (step {}): test accuracy {:.2f}%", e.epoch, e.step, e.test_accuracy_percent);
        if (config.shadow) fmt::print(", fp64 shadow {:.2f}%", e.shadow_test_accuracy_percent);
        fmt::print("\n");
      }
      const auto& m = result.memory;
      fmt::print(
          "memory (bytes): weights {} master {} activations {} gradients {} optimizer state {} total {}\n",
          m.weights, m.master_weights, m.activations, m.gradients, m.optimizer_state, m.total());
      fmt::print("wrote {}/steps.csv, histograms.csv, meta.json\n", options.out_dir.string());
      return 0;
    };
  });
}

const Registrar registered("train", add_train);
}  // namespace

}  // namespace rpsim::cli
