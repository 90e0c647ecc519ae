// rpsim tc-validate DIR [--model PRESET]: checks a tensor-core model bit for
// bit against vectors measured on a GPU (layout of shared/tc-golden/<GPU>).
#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/validation/tensor_core_golden.hpp"

namespace rpsim::cli {

namespace {

void add_tc_validate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("tc-validate",
                                 "Check a tensor-core model bit for bit against GPU-measured vectors "
                                 "(a folder laid out like shared/tc-golden/<GPU>)");
  auto dir = std::make_shared<std::string>();
  auto model = std::make_shared<std::string>();
  auto show = std::make_shared<std::size_t>(5);
  cmd->add_option("DIR", *dir, "GPU folder, e.g. ../shared/tc-golden/H100")->required();
  cmd->add_option("--model", *model,
                  "preset: v100 t4 a100 a2 a30 ada l40s h100 h200 b200 (default: from the folder name)");
  cmd->add_option("--show", *show, "mismatches to print per set")->capture_default_str();
  cmd->callback([=, &action] {
    action = [=]() -> int {
      if (!std::filesystem::is_directory(*dir))
        throw UsageError(fmt::format("DIR '{}' is not a folder", *dir));
      std::vector<sim::GoldenSet> sets;
      try {
        sets = sim::load_golden_gpu(*dir);
      } catch (const sim::GoldenDataError& e) {
        throw UsageError(e.what());
      }
      std::size_t passed = 0, failed = 0;
      for (const auto& set : sets) {
        sim::TensorCoreModel m;
        try {
          m = sim::golden_model(set, *model);
        } catch (const std::invalid_argument& e) {
          throw UsageError(fmt::format("--model '{}': {}", *model, e.what()));
        }
        const auto r = sim::check_golden(set, m, *show);
        // The instruction's schedule when it is not one plain step.
        std::string schedule = fmt::format("{} per step", m.terms_per_step);
        if (m.instruction_terms() != m.terms_per_step)
          schedule +=
              fmt::format(", {} per instruction, interleave {}", m.instruction_terms(), m.step_interleave);
        if (m.c_join == sim::CJoin::after_products) schedule += ", C added last";
        fmt::print("{} {}->{}: {}/{} bit-exact (model {}, K = {}, {})\n", set.gpu, set.input_folder,
                   set.output.man_bits == 10 ? "fp16" : "fp32", r.passed, r.total, m.name, set.k, schedule);
        for (const auto& line : r.first_mismatches) fmt::print("  mismatch {}\n", line);
        passed += r.passed;
        failed += r.total - r.passed;
      }
      fmt::print("{} passed, {} failed\n", passed, failed);
      return failed == 0 ? 0 : 1;
    };
  });
}

const Registrar registered("tc-validate", add_tc_validate);

}  // namespace

}  // namespace rpsim::cli
