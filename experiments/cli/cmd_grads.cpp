// rpsim grads FILE.npz: a user's gradient dump (every param.grad and
// activation gradient of one PyTorch step, experiments/python/dump_grads.py)
// -> for each tensor, format and loss scale the fractions that underflow
// (non-zero -> 0), land in the subnormals and overflow; a log2 histogram with
// the zero bin (Micikevicius et al. 2018, Fig. 3's form); and the static
// scales at which nothing overflows and the fewest values underflow. The
// counting is sim/scaling's (gradient_report.hpp); this file reads and writes.
// With --recipes, what each block-scaled policy's gradient quantiser would do
// to each tensor at this step (TE's LogFp8TensorStats what-if): the fractions
// of non-zero entries that underflow to zero, saturate, or land on a
// subnormal element (formats recipe_effect).
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <sstream>
#include <utility>

#include "commands.hpp"
#include "rpsim/formats/recipe.hpp"
#include "rpsim/io/npy.hpp"
#include "rpsim/io/results_io.hpp"
#include "rpsim/scaling/gradient_report.hpp"
#include "rpsim/train/config_error.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::cli {
namespace {

struct GradsArgs {
  std::string file, out = "results/grads", formats = "binary16,bfloat16,e4m3,e5m2";
  std::string recipes = "mxfp8,nvfp4,fp8-blockwise";
  int min_log2 = -8, max_log2 = 32;
};

std::vector<const Format*> format_list(const std::string& text) {
  std::vector<const Format*> out;
  std::stringstream in(text);
  // A spec may itself hold commas (exp=5,man=10): a key=value item after
  // another key=value item continues that spec; anything else starts a new one.
  std::string item, spec;
  while (std::getline(in, item, ',')) {
    if (!spec.empty() && item.find('=') != std::string::npos && spec.find('=') != std::string::npos) {
      spec += "," + item;
      continue;
    }
    if (!spec.empty()) out.push_back(&format(spec));
    spec = item;
  }
  if (!spec.empty()) out.push_back(&format(spec));
  if (out.empty()) throw UsageError("--formats: no format given");
  return out;
}

// recipes.csv: per tensor and block-scaled policy, what the policy's
// gradient quantiser (its backward element format, 1-D blocks along the
// tensor's flattened order) does to the tensor's entries.
std::string recipes_csv(const std::string& list, const std::vector<sim::scaling::NamedValues>& tensors,
                        std::vector<std::string>& findings) {
  std::string csv =
      "tensor,recipe,element,block,entries,nonzero,underflow_fraction,saturated_fraction,subnormal_"
      "fraction\n";
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    sim::train::PrecisionPolicy p;
    QuantSpec spec;
    try {
      p = sim::train::named_policy(name);
      spec = sim::train::gradient_spec(p);
    } catch (const sim::train::ConfigError& e) {
      throw UsageError(fmt::format("--recipes: {}", e.what()));
    }
    const Format& f = *p.rule("linear").backward_compute;
    double worst = 0;
    std::string worst_name;
    for (const auto& t : tensors) {
      const std::vector<float> x(t.values.begin(), t.values.end());
      const RecipeEffect e = recipe_effect(quantize(spec, x, 1, x.size()), x);
      const double n = e.nonzero ? double(e.nonzero) : 1.0;
      csv += fmt::format("{},{},{},{},{},{},{:.9g},{:.9g},{:.9g}\n", t.name, name, f.name, p.fp8.block_size,
                         e.entries, e.nonzero, e.underflow / n, e.saturated / n, e.subnormal / n);
      if (e.underflow / n >= worst) {
        worst = e.underflow / n;
        worst_name = t.name;
      }
    }
    findings.push_back(
        fmt::format("{} ({} gradients, blocks of {}): at most {:.3g} of a tensor's non-zero entries "
                    "underflow ({})",
                    name, f.name, p.fp8.block_size, worst, worst_name));
  }
  return csv;
}

int run_grads(const GradsArgs& a) {
  if (a.out.empty()) throw UsageError("--out '': an empty folder name");
  // Checked before any work: an existing file where the folder should be
  // was a filesystem_error (exit 3) after the whole report was computed.
  if (std::filesystem::exists(a.out) && !std::filesystem::is_directory(a.out))
    throw UsageError(fmt::format("--out '{}': exists and is not a folder", a.out));
  // Each scale 2^k must be a binary64 number other than 0: --min-log2-scale
  // -100000 was "loss scale 0.000000 is not a positive finite number".
  for (const auto& [option, k] :
       {std::pair{"--min-log2-scale", a.min_log2}, {"--max-log2-scale", a.max_log2}})
    if (k < -1074 || k > 1023)
      throw UsageError(fmt::format("{} {}: 2^{} is no binary64 number (from -1074 to 1023)", option, k, k));
  if (a.min_log2 > a.max_log2)
    throw UsageError(fmt::format("--min-log2-scale {} is above --max-log2-scale {}", a.min_log2, a.max_log2));
  const auto formats = format_list(a.formats);
  std::vector<io::NumericArray> arrays;
  try {
    arrays = io::read_array_file(a.file);
  } catch (const io::ArrayFileError& e) {
    throw UsageError(e.what());
  }
  std::vector<sim::scaling::NamedValues> tensors;
  for (const auto& arr : arrays) tensors.push_back({arr.name, arr.values});
  if (tensors.empty()) throw UsageError(fmt::format("'{}' holds no arrays", a.file));
  auto report = sim::scaling::gradient_report(tensors, formats, a.min_log2, a.max_log2);
  const std::string recipes = a.recipes.empty() ? "" : recipes_csv(a.recipes, tensors, report.findings);
  const std::filesystem::path dir(a.out);
  io::ensure_writable_dir(dir);  // IoError (exit 2) naming the folder
  io::write_atomic(dir / "fractions.csv", report.fractions_csv);
  io::write_atomic(dir / "histogram.csv", report.histogram_csv);
  io::write_atomic(dir / "scale_range.csv", report.scale_range_csv);
  if (!recipes.empty()) io::write_atomic(dir / "recipes.csv", recipes);
  fmt::print("{}: {} tensors, scales 2^{}..2^{}\n", a.file, tensors.size(), a.min_log2, a.max_log2);
  for (const auto& line : report.findings) fmt::print("  {}\n", line);
  fmt::print("wrote fractions.csv, histogram.csv, scale_range.csv{} to {}\n",
             recipes.empty() ? "" : ", recipes.csv", a.out);
  return 0;
}

void add_grads(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("grads",
                                 "Underflow, subnormal and overflow fractions of a gradient dump "
                                 "(.npz/.npy) per format and loss scale");
  auto a = std::make_shared<GradsArgs>();
  cmd->add_option("FILE", a->file, ".npz of act_grad/<module> and param_grad/<name> arrays, or one .npy")
      ->required();
  cmd->add_option("--formats", a->formats, "comma-separated format names or specs")->capture_default_str();
  cmd->add_option("--min-log2-scale", a->min_log2, "smallest loss scale tried, as log2")
      ->capture_default_str();
  cmd->add_option("--max-log2-scale", a->max_log2, "largest loss scale tried, as log2")
      ->capture_default_str();
  cmd->add_option(
         "--recipes", a->recipes,
         "block-scaled policies whose gradient quantiser's underflow, saturation and subnormal fractions "
         "go to recipes.csv ('' for none)")
      ->capture_default_str();
  cmd->add_option("-o,--out", a->out, "output directory")->capture_default_str();
  cmd->callback([=, &action] { action = [=] { return run_grads(*a); }; });
}

const Registrar registered("grads", add_grads);

}  // namespace
}  // namespace rpsim::cli
