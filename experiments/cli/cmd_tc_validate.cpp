// rpsim tc-validate FILE|DIR [--model PRESET] [--instruction mma.sync|wgmma]:
// checks a tensor-core model bit for bit against vectors measured on a GPU
// (layout of shared/tc-golden/<GPU>) or made by MMA-Sim (shared/mma-sim: a
// folder of such files, or one file; the preset comes from each header).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "commands.hpp"
#include "rpsim/accumulation/tensor_core_operands.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/validation/mma_sim_vectors.hpp"
#include "rpsim/validation/tensor_core_golden.hpp"

namespace rpsim::cli {

namespace {

struct Options {
  std::string dir, model, instruction;
  std::size_t show = 5;
};

std::string set_label(const sim::GoldenSet& set) {
  const auto* out = sim::tensor_core_operand_class(set.output);
  return fmt::format("{} {}->{}", set.gpu, set.input_folder, out ? out->short_name : set.output.name);
}

// The instruction's schedule when it is not one plain step.
std::string schedule(const sim::TensorCoreModel& m) {
  std::string s = fmt::format("{} per step", m.terms_per_step);
  if (m.instruction_terms() != m.terms_per_step)
    s += fmt::format(", {} per instruction, interleave {}", m.instruction_terms(), m.step_interleave);
  if (m.c_join == sim::CJoin::after_products) s += ", C added last";
  return s;
}

std::vector<sim::GoldenSet> load(const Options& o) {
  if (!std::filesystem::is_directory(o.dir)) throw UsageError(fmt::format("DIR '{}' is not a folder", o.dir));
  const auto& names = sim::tensor_core_preset_names();
  if (!o.model.empty() && std::find(names.begin(), names.end(), o.model) == names.end())
    throw UsageError(
        fmt::format("--model '{}' is not a tensor core preset (known: {})", o.model, fmt::join(names, " ")));
  try {
    auto sets = sim::load_golden_gpu(o.dir);
    // --instruction overrides what the folder's conventions.json says.
    if (!o.instruction.empty())
      for (auto& s : sets) s.instruction = o.instruction;
    return sets;
  } catch (const sim::GoldenDataError& e) {
    throw UsageError(e.what());
  }
}

// Ctrl-C or SIGTERM stop the check between two files (sets): every line
// printed is whole, and stderr says how far it got (exit 130). Killed by the
// signal, it left its last line cut in half in a pipe's buffer.
int interrupted(const char* what, std::size_t done, std::size_t total, std::size_t passed,
                std::size_t failed) {
  std::fflush(stdout);
  fmt::print(stderr,
             "rpsim tc-validate: interrupted after {} of {} {}: {} passed, {} failed so far (no summary)\n",
             done, total, what, passed, failed);
  return 130;
}

// MMA-Sim files: each checked with the preset its header names; files with
// no preset row are counted and listed, never passed.
int run_mma_sim(const Options& o, const std::vector<std::filesystem::path>& files) {
  std::size_t passed = 0, failed = 0, full = 0, checked = 0;
  std::vector<std::string> no_preset;
  for (const auto& path : files) {
    if (io::interrupted())
      return interrupted("files", checked + no_preset.size(), files.size(), passed, failed);
    sim::MmaSimFile f;
    try {
      f = sim::load_mma_sim_file(path);
    } catch (const sim::GoldenDataError& e) {
      throw UsageError(e.what());
    }
    std::string why;
    const auto m = sim::mma_sim_model(f, why);
    const std::string name = path.filename().string();
    if (!m) {
      no_preset.push_back(fmt::format("{} ({} cases): {}", name, f.cases.size(), why));
      continue;
    }
    const auto r = sim::check_mma_sim(f, *m, o.show);
    fmt::print("{}: {}/{} (model {}{})\n", name, r.passed, r.total, m->name,
               f.nan_any ? ", NaN as is-NaN" : "");
    for (const auto& line : r.first_mismatches) fmt::print("  mismatch {}\n", line);
    passed += r.passed;
    failed += r.total - r.passed;
    ++checked;
    full += r.passed == r.total;
  }
  for (const auto& s : no_preset) fmt::print("no preset: {}\n", s);
  fmt::print("{} passed, {} failed; {}/{} files at 100%, {} files with no preset\n", passed, failed, full,
             checked, no_preset.size());
  return failed == 0 && no_preset.empty() ? 0 : 1;
}

int run(const Options& o) {
  io::install_interrupt_handler();
  // An MMA-Sim file, or a folder of them, rather than a tc-golden GPU folder.
  std::vector<std::filesystem::path> mma_files;
  try {
    mma_files = sim::mma_sim_files(o.dir);
  } catch (const sim::GoldenDataError& e) {
    throw UsageError(e.what());
  }
  if (!mma_files.empty()) {
    if (!o.model.empty() || !o.instruction.empty())
      throw UsageError(
          fmt::format("'{}' holds MMA-Sim files, whose headers name the preset and instruction: "
                      "--model and --instruction apply to tc-golden folders only",
                      o.dir));
    return run_mma_sim(o, mma_files);
  }
  const auto sets = load(o);
  std::size_t passed = 0, failed = 0;
  std::vector<std::string> skipped;
  for (std::size_t i = 0; i < sets.size(); ++i) {
    const auto& set = sets[i];
    if (io::interrupted()) return interrupted("sets", i, sets.size(), passed, failed);
    sim::TensorCoreModel m;
    try {
      m = sim::golden_model(set, o.model);
    } catch (const sim::GoldenDataError& e) {
      throw UsageError(e.what());
    } catch (const std::invalid_argument& e) {
      // The preset lacks this set's input, output or instruction: check the others.
      skipped.push_back(fmt::format("{}: {}", set_label(set), e.what()));
      continue;
    }
    const auto r = sim::check_golden(set, m, o.show);
    fmt::print("{} [{}, C {}]: {}/{} bit-exact (model {}, K = {}, {})\n", set_label(set),
               tensor_core_instruction_name(m.instruction), set.c_loaded ? "loaded" : "= 0", r.passed,
               r.total, m.name, set.k, schedule(m));
    for (const auto& line : r.first_mismatches) fmt::print("  mismatch {}\n", line);
    passed += r.passed;
    failed += r.total - r.passed;
  }
  for (const auto& s : skipped) fmt::print("skipped {}\n", s);
  if (skipped.size() == sets.size())
    throw UsageError(fmt::format("'{}': no set can be checked with {}", o.dir,
                                 o.model.empty() ? "the folder's preset" : "--model " + o.model));
  fmt::print("{} passed, {} failed{}\n", passed, failed,
             skipped.empty() ? "" : fmt::format(", {} sets skipped", skipped.size()));
  return failed == 0 ? 0 : 1;
}

void add_tc_validate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("tc-validate",
                                 "Check a tensor-core model bit for bit against GPU-measured vectors "
                                 "(a folder laid out like shared/tc-golden/<GPU>) or MMA-Sim vectors "
                                 "(shared/mma-sim: a folder or one file; the preset and instruction come "
                                 "from each file's header)");
  auto o = std::make_shared<Options>();
  cmd->add_option("PATH", o->dir,
                  "GPU folder, e.g. ../shared/tc-golden/H100, or an MMA-Sim file or folder, e.g. "
                  "../shared/mma-sim")
      ->required();
  cmd->add_option("--model", o->model,
                  "preset (default: from the folder name or its conventions.json); sets the preset lacks are "
                  "skipped and listed:\n" +
                      sim::tensor_core_preset_help());
  cmd->add_option("--instruction", o->instruction,
                  "check every set as measured with this instruction, whatever conventions.json says")
      ->check(CLI::IsMember({"mma.sync", "wgmma"}));
  cmd->add_option("--show", o->show, "mismatches to print per set")->capture_default_str();
  cmd->callback([o, &action] { action = [o] { return run(*o); }; });
}

const Registrar registered("tc-validate", add_tc_validate);

}  // namespace

}  // namespace rpsim::cli
