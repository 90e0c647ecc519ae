// rpsim gemm: a random (or file-given) GEMM under an accumulation model, its
// error against the exact product, and the classical and probabilistic bounds.
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "commands.hpp"
#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/error_analysis.hpp"
#include "rpsim/accumulation/exact_accumulator.hpp"
#include "rpsim/accumulation/gemm.hpp"

namespace rpsim::cli {

namespace {

// A whitespace-separated matrix, one row per line.
sim::Matrix read_matrix(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("cannot open matrix file '{}'", path));
  std::vector<std::vector<double>> rows;
  std::string line;
  std::size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#')
      continue;
    std::istringstream ss(line);
    std::vector<double> row;
    std::string tok;
    while (ss >> tok) {
      std::size_t used = 0;
      double v = 0;
      try {
        v = std::stod(tok, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != tok.size()) throw UsageError(fmt::format("{}:{}: '{}' is not a number", path, n, tok));
      // An error against exact needs finite inputs; say so instead of printing NaN errors.
      if (!std::isfinite(v)) throw UsageError(fmt::format("{}:{}: '{}' is not finite", path, n, tok));
      row.push_back(v);
    }
    if (!rows.empty() && row.size() != rows[0].size())
      throw UsageError(
          fmt::format("{}:{}: {} columns, but the first row has {}", path, n, row.size(), rows[0].size()));
    rows.push_back(std::move(row));
  }
  if (rows.empty()) throw UsageError(fmt::format("matrix file '{}' is empty", path));
  sim::Matrix m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows[0].size()));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[0].size(); ++j)
      m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = rows[i][j];
  return m;
}

sim::Matrix random_matrix(Eigen::Index r, Eigen::Index c, const std::string& dist, std::mt19937_64& rng) {
  sim::Matrix m(r, c);
  std::uniform_real_distribution<double> uni(-1, 1);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_int_distribution<int> scale(-8, 8);
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    if (dist == "uniform")
      m.data()[i] = uni(rng);
    else if (dist == "normal")
      m.data()[i] = nd(rng);
    else
      m.data()[i] = std::ldexp(nd(rng), scale(rng));  // wide: 2^-8 .. 2^8 spread of magnitudes
  }
  return m;
}

void add_gemm(CLI::App& app, Action& action) {
  auto* cmd =
      app.add_subcommand("gemm", "Random GEMM under an accumulation model: error against exact, and bounds");
  struct Opts {
    Eigen::Index m = 64, n = 64, k = 256;
    std::string input = "fp16", output, model = "h100", dist = "normal", a_file, b_file;
    std::uint64_t seed = 1;
    int threads = 1;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--m", o->m, "rows of A and D")->capture_default_str();
  cmd->add_option("--n", o->n, "columns of B and D")->capture_default_str();
  cmd->add_option("--k", o->k, "inner dimension")->capture_default_str();
  cmd->add_option("--input", o->input, "format A and B are rounded to (RNE)")->capture_default_str();
  cmd->add_option("--output", o->output, "tensor-core output format fp32|fp16 (default fp32)");
  cmd->add_option("--model", o->model,
                  "tensor-core preset (v100 ... b200) or an accumulation model spec "
                  "(sequential:fp32:rne, fma, pairwise, blocked:32, kahan, exact, tc:h100:bf16)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
  cmd->add_option("--dist", o->dist, "uniform | normal | wide")->capture_default_str();
  cmd->add_option("--a", o->a_file, "read A from a text file (rows of numbers) instead");
  cmd->add_option("--b", o->b_file, "read B from a text file instead");
  cmd->add_option("--threads", o->threads, "OpenMP threads")->capture_default_str();
  cmd->callback([o, &action] {
    action = [o]() -> int {
      if (o->dist != "uniform" && o->dist != "normal" && o->dist != "wide")
        throw UsageError(fmt::format("--dist '{}': use uniform, normal or wide", o->dist));
      if (o->m < 1 || o->n < 1 || o->k < 1)
        throw UsageError(fmt::format("--m --n --k must be positive (got {} {} {})", o->m, o->n, o->k));
      Format input;
      try {
        input = parse_format(o->input);
      } catch (const std::exception& e) {
        throw UsageError(fmt::format("--input '{}': {}", o->input, e.what()));
      }
      // A bare preset name means the tensor-core model for --input/--output.
      std::string spec = o->model;
      if (spec.find(':') == std::string::npos) {
        const auto& names = sim::tensor_core_preset_names();
        if (std::find(names.begin(), names.end(), spec) != names.end())
          spec = fmt::format("tc:{}:{}:{}", spec, o->input, o->output.empty() ? "fp32" : o->output);
      } else if (!o->output.empty()) {
        throw UsageError("--output applies to a bare preset name only; put the format in the model spec");
      }
      sim::AccumulationModel model;
      try {
        model = sim::AccumulationModel::parse(spec);
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--model: {}", e.what()));
      }
      std::mt19937_64 rng(o->seed);
      sim::Matrix a = o->a_file.empty() ? random_matrix(o->m, o->k, o->dist, rng) : read_matrix(o->a_file);
      sim::Matrix b =
          o->b_file.empty() ? random_matrix(a.cols(), o->n, o->dist, rng) : read_matrix(o->b_file);
      if (a.cols() != b.rows())
        throw UsageError(fmt::format("A is {}x{} but B is {}x{}", a.rows(), a.cols(), b.rows(), b.cols()));
      a = sim::round_to_format(a, input);
      b = sim::round_to_format(b, input);
      const sim::Matrix c = sim::Matrix::Zero(a.rows(), b.cols());
      const sim::GemmOptions opts{o->threads};
      const sim::Matrix d = sim::gemm(model, a, b, c, opts);
      const sim::Matrix exact = sim::gemm(sim::AccumulationModel(sim::Exact{}), a, b, c, opts);
      const Format& out = model.output_format();
      const auto stats = sim::compare(d, exact, out);
      // Bounds relative to sum |a||b| (componentwise): gamma_k u and sqrt(k) u.
      const std::size_t k = static_cast<std::size_t>(a.cols());
      const double u = model.unit_roundoff();
      double max_ratio = 0;  // max |d - exact| / sum|a||b|
      const sim::Matrix abs_prod =
          sim::gemm(sim::AccumulationModel(sim::Exact{}), a.cwiseAbs(), b.cwiseAbs(), c, opts);
      for (Eigen::Index i = 0; i < d.size(); ++i)
        if (abs_prod.data()[i] > 0)
          max_ratio = std::max(max_ratio, std::fabs(d.data()[i] - exact.data()[i]) / abs_prod.data()[i]);
      fmt::print("model: {}\n", model.spec());
      fmt::print("shape: M={} N={} K={}  input: {}  output: {}  dist: {}  seed: {}\n", a.rows(), b.cols(), k,
                 input.name, out.name, o->a_file.empty() ? o->dist : "file", o->seed);
      fmt::print("max_abs_error: {:.6e}\nmean_abs_error: {:.6e}\n", stats.max_abs, stats.mean_abs);
      fmt::print("max_rel_error: {:.6e}\nmean_rel_error: {:.6e}\n", stats.max_rel, stats.mean_rel);
      fmt::print("max_error_ulps: {:.4f}\nmean_error_ulps: {:.4f}\n", stats.max_ulps, stats.mean_ulps);
      fmt::print("max_componentwise_error (|d-exact| / sum|a||b|): {:.6e}\n", max_ratio);
      fmt::print("unit_roundoff_u: {:.6e}\n", u);
      fmt::print("bound_gamma_k_u (deterministic, n=K): {:.6e}\n", sim::gamma_n(k, u));
      fmt::print("bound_sqrt_k_u (probabilistic, lambda=1): {:.6e}\n", sim::probabilistic_gamma_n(k, u));
      return 0;
    };
  });
}

const Registrar registered("gemm", add_gemm);

}  // namespace

}  // namespace rpsim::cli
