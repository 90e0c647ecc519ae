// Study 1, `summation`: stagnation of recursive summation under round to
// nearest, the spread of the stochastically rounded sum, and the error of
// sums and dot products against n for every accumulation model.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/error_analysis.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/study/summation.hpp"

namespace rpsim::sim::study {

namespace {

bool deterministic(RoundingMode mode) {
  return mode != RoundingMode::stochastic;
}

// Uniform on [0, 1) from 53 random bits.
double uniform01(std::uint64_t bits) {
  return double(bits >> 11) * 0x1p-53;
}

// n from n_min to n_max, `per_decade` points per decade, log-spaced, distinct.
std::vector<std::int64_t> log_spaced(std::int64_t n_min, std::int64_t n_max, int per_decade) {
  std::vector<std::int64_t> out;
  const double decades = std::log10(double(n_max) / double(n_min));
  const int steps = std::max(1, int(std::lround(decades * per_decade)));
  for (int i = 0; i <= steps; ++i) {
    const auto n = std::int64_t(std::llround(double(n_min) * std::pow(10.0, decades * i / steps)));
    if (out.empty() || n != out.back()) out.push_back(n);
  }
  return out;
}

std::vector<std::int64_t> sample_points(std::int64_t n) {
  std::vector<std::int64_t> at = log_spaced(1, n, 40);
  // Linear samples too, so the stagnation plateau is visible on a linear axis.
  for (int i = 1; i <= 200; ++i) at.push_back(n * i / 200);
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  return at;
}

void stagnation_table(const StudyConfig& cfg, StudyOutput& out) {
  auto& table = out.table("stagnation.csv", {"format", "rounding", "addend", "max_terms", "stagnation_terms",
                                             "stagnation_value", "final_sum", "predicted_value"});
  const auto max_terms = cfg.integer("stagnation_max_terms");
  if (max_terms <= 0) throw cfg.error("stagnation_max_terms", "must be positive");
  for (const std::string& name : cfg.strings("stagnation_formats")) {
    const Format& f = format(name);
    const ConstantSum s = recursive_constant_sum(f, 1.0, max_terms, RoundingMode::nearest_even);
    // With p-bit significands, s + 1 is a tie at s = 2^p and RNE keeps the
    // even s: the sum of ones stops at 2^p (2048 for fp16, 256 for bf16).
    const double predicted = std::ldexp(1.0, f.precision());
    table.row(f.name, "rne", 1.0, max_terms, s.stagnation_terms, s.stagnation_value, s.final_sum, predicted);
    if (s.stagnation_terms >= 0)
      out.findings.push_back(fmt::format("{} RNE recursive sum of ones stagnates at {} (2^{} = {})", f.name,
                                         s.stagnation_value, f.precision(), predicted));
    else
      out.findings.push_back(
          fmt::format("{} RNE sum of ones did not stagnate within {} terms", f.name, max_terms));
  }
}

void stochastic_tables(const StudyConfig& cfg, std::uint64_t seed, StudyOutput& out) {
  auto& trajectory =
      out.table("trajectory.csv", {"format", "rounding", "addend", "terms", "computed_sum", "exact_sum"});
  auto& sr = out.table("sr_sums.csv", {"format", "addend", "terms", "trial", "seed", "computed_sum",
                                       "exact_sum", "error", "sigma", "sigma_ulp2_over_4", "bias_bound",
                                       "sigmas", "bound", "within_bound", "rne_sum"});
  const auto trials = cfg.integer("sr_trials");
  const double sigmas = cfg.number("sr_sigmas");
  if (trials <= 0) throw cfg.error("sr_trials", "must be positive");
  if (!(sigmas > 0)) throw cfg.error("sr_sigmas", "must be positive");
  const Rounding default_rounding;
  if (!cfg.has("sr_cases") || !cfg.values().at("sr_cases").is_array())
    throw cfg.error("sr_cases", "must be an array of objects");
  int case_index = 0;
  for (const auto& c : cfg.values().at("sr_cases")) {
    const std::string where = fmt::format("sr_cases[{}]", case_index++);
    if (!c.is_object() || !c.contains("format") || !c.contains("addend") || !c.contains("terms") ||
        !c.at("format").is_string() || !c.at("addend").is_number() || !c.at("terms").is_number_integer())
      throw cfg.error(where, "must be {\"format\": NAME, \"addend\": NUMBER, \"terms\": INTEGER}");
    const Format& f = format(c.at("format").get<std::string>());
    const double addend = c.at("addend").get<double>();
    const auto n = c.at("terms").get<std::int64_t>();
    if (to_double(f, round_double(f, addend)) != addend)
      throw cfg.error(where, fmt::format("addend {} is not representable in {}", addend, f.name));
    const auto at = sample_points(n);
    const ConstantSum rne = recursive_constant_sum(f, addend, n, RoundingMode::nearest_even, 0, at);
    for (const auto& [terms, value] : rne.samples)
      trajectory.row(f.name, "rne", addend, terms, value, double(terms) * addend);
    const StochasticSumBound b =
        stochastic_constant_sum_bound(f, addend, n, default_rounding.stochastic_bits);
    int within = 0;
    double worst = 0;
    for (std::int64_t t = 0; t < trials; ++t) {
      const std::uint64_t trial_seed = counter_random(seed, 1, std::uint64_t(t));
      const ConstantSum s = recursive_constant_sum(f, addend, n, RoundingMode::stochastic, trial_seed,
                                                   t == 0 ? at : std::vector<std::int64_t>{});
      if (t == 0)
        for (const auto& [terms, value] : s.samples)
          trajectory.row(f.name, "sr", addend, terms, value, double(terms) * addend);
      const double err = s.final_sum - b.exact_sum;
      const bool ok = std::abs(err) <= b.bound(sigmas);
      within += ok;
      worst = std::max(worst, std::abs(err) / b.sigma);
      sr.row(f.name, addend, n, t, trial_seed, s.final_sum, b.exact_sum, err, b.sigma, b.sigma_ulp2_4, b.bias,
             sigmas, b.bound(sigmas), ok, rne.final_sum);
    }
    out.findings.push_back(fmt::format(
        "{} SR sum of {} x {}: {}/{} trials within {} sigma + bias = {:.4g} of {} (worst {:.2f} sigma; RNE "
        "gives {})",
        f.name, n, addend, within, trials, sigmas, b.bound(sigmas), b.exact_sum, worst, rne.final_sum));
  }
}

std::vector<AccumulationModel> error_models(const StudyConfig& cfg) {
  std::vector<AccumulationModel> models;
  for (const std::string& spec : cfg.strings("error_models")) {
    try {
      models.push_back(AccumulationModel::parse(spec));
    } catch (const std::invalid_argument& e) {
      throw cfg.error("error_models", fmt::format("has a bad model '{}': {}", spec, e.what()));
    }
  }
  return models;
}

struct ErrorJob {
  std::size_t model;
  std::size_t operation;  // 0: sum, 1: dot
  std::int64_t n;
  std::int64_t trial;
};
struct ErrorResult {
  double computed = 0, exact = 0, abs_sum = 0;
};

// One sum or dot product of n uniform values in the model's input format;
// the same data for every model: keyed by (seed, operation, n, trial).
ErrorResult error_case(const AccumulationModel& model, const ErrorJob& job, std::uint64_t seed,
                       double scale) {
  static const AccumulationModel exact = AccumulationModel::parse("exact");
  const Format& in = model.input_format();
  const std::uint64_t stream =
      (std::uint64_t(job.operation) << 56) ^ (std::uint64_t(job.n) << 8) ^ std::uint64_t(job.trial);
  std::vector<double> a(std::size_t(job.n)), b(std::size_t(job.n), 1.0);
  // Dot products take both factors in [0, sqrt(scale)) so products, like
  // summands, lie in [0, scale): nonnegative data make every rounding error
  // count (the worst case of Higham & Mary's experiments).
  const double factor_scale = job.operation == 0 ? scale : std::sqrt(scale);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = to_double(in, round_double(in, factor_scale * uniform01(counter_random(seed, 2 * stream, i))));
    if (job.operation == 1)
      b[i] =
          to_double(in, round_double(in, factor_scale * uniform01(counter_random(seed, 2 * stream + 1, i))));
  }
  ErrorResult r;
  r.computed = model.dot(a, b, 0.0, std::uint64_t(job.trial));
  r.exact = exact.dot(a, b);
  for (std::size_t i = 0; i < a.size(); ++i) r.abs_sum += std::abs(a[i] * b[i]);
  return r;
}

void error_table(const StudyConfig& cfg, std::uint64_t seed, StudyOutput& out) {
  const std::vector<AccumulationModel> models = error_models(cfg);
  if (cfg.integer("error_n_min") < 1) throw cfg.error("error_n_min", "must be at least 1");
  if (cfg.integer("error_n_min") > cfg.integer("error_n_max"))
    throw cfg.error("error_n_min",
                    fmt::format("must not exceed error_n_max ({})", cfg.integer("error_n_max")));
  if (cfg.integer("error_points_per_decade") <= 0)
    throw cfg.error("error_points_per_decade", "must be positive");
  const auto n_values = log_spaced(cfg.integer("error_n_min"), cfg.integer("error_n_max"),
                                   int(cfg.integer("error_points_per_decade")));
  const auto trials = cfg.integer("error_trials");
  const double scale = cfg.number("data_scale");
  if (trials <= 0) throw cfg.error("error_trials", "must be positive");
  if (!(scale > 0) || !std::isfinite(scale))
    throw cfg.error("data_scale", "must be a positive finite number");
  const std::vector<std::string> operations = {"sum", "dot"};
  std::vector<ErrorJob> jobs;
  for (std::size_t m = 0; m < models.size(); ++m)
    for (std::size_t op = 0; op < operations.size(); ++op)
      for (const auto n : n_values)
        for (std::int64_t t = 0; t < trials; ++t) jobs.push_back({m, op, n, t});
  std::vector<ErrorResult> results(jobs.size());
#pragma omp parallel for schedule(dynamic)
  for (std::size_t j = 0; j < jobs.size(); ++j)
    results[j] = error_case(models[jobs[j].model], jobs[j], seed, scale);
  auto& table = out.table("error_vs_n.csv", {"operation", "model", "input_format", "accumulator_format",
                                             "rounding", "n", "trial", "computed", "exact", "relative_error",
                                             "unit_roundoff", "bound_gamma_n", "bound_sqrt_n_u"});
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const ErrorJob& job = jobs[j];
    const AccumulationModel& model = models[job.model];
    const RoundingMode mode = model.rounding();
    const double u = unit_roundoff(model.output_format(), mode);
    const ErrorResult& r = results[j];
    // Relative to sum |a_i b_i|, the quantity the bounds are stated for.
    const double rel = r.abs_sum > 0 ? std::abs(r.computed - r.exact) / r.abs_sum : 0.0;
    table.row(operations[job.operation], model.spec(), model.input_format().name, model.output_format().name,
              rounding_name(mode), job.n, job.trial, r.computed, r.exact, rel, u,
              gamma_n(std::size_t(job.n), u), std::sqrt(double(job.n)) * u);
  }
  nlohmann::json specs = nlohmann::json::array();
  for (const auto& m : models) specs.push_back(m.spec());
  out.meta["models"] = specs;
}

}  // namespace

ConstantSum recursive_constant_sum(const Format& fmt, double addend, std::int64_t n, RoundingMode mode,
                                   std::uint64_t seed, const std::vector<std::int64_t>& sample_at) {
  Rounding r;
  r.mode = mode;
  Flags flags = 0;
  const std::uint64_t a = round_double(fmt, addend, r, flags);
  std::uint64_t s = fmt.zero_bits(false);
  ConstantSum out;
  std::size_t next_sample = 0;
  const auto record = [&](std::int64_t terms) {
    while (next_sample < sample_at.size() && sample_at[next_sample] == terms)
      out.samples.emplace_back(terms, to_double(fmt, s)), ++next_sample;
  };
  record(0);
  for (std::int64_t i = 1; i <= n; ++i) {
    r.random_bits = counter_random(seed, 0, std::uint64_t(i));
    const std::uint64_t next = add(fmt, s, a, r, flags);
    if (next == s && deterministic(mode)) {
      // A fixed point: every later addition gives the same s again.
      out.stagnation_terms = i - 1;
      out.stagnation_value = to_double(fmt, s);
      while (next_sample < sample_at.size() && sample_at[next_sample] <= n)
        out.samples.emplace_back(sample_at[next_sample++], out.stagnation_value);
      break;
    }
    s = next;
    record(i);
  }
  out.final_sum = to_double(fmt, s);
  if (out.stagnation_terms < 0) out.stagnation_value = std::nan("");
  return out;
}

StochasticSumBound stochastic_constant_sum_bound(const Format& fmt, double addend, std::int64_t n,
                                                 int stochastic_bits) {
  StochasticSumBound b;
  double variance = 0, variance_ulp2_4 = 0;
  const double truncation = std::ldexp(1.0, -stochastic_bits);
  for (std::int64_t i = 1; i <= n; ++i) {
    const double exact = double(i) * addend;
    // The i-th addition computes s_{i-1} + addend; its result lies in the
    // binade of i*addend, where the grid spacing is u_i.
    const double u = ulp(fmt, exact);
    const double f = std::fmod(addend, u) / u;  // s_{i-1} is a multiple of u_i
    variance += f * (1 - f) * u * u;
    variance_ulp2_4 += u * u / 4;
    if (f != 0) b.bias += u * truncation;
  }
  b.exact_sum = double(n) * addend;
  b.sigma = std::sqrt(variance);
  b.sigma_ulp2_4 = std::sqrt(variance_ulp2_4);
  return b;
}

StudyOutput run_summation(const StudyOptions& options) {
  const StudyConfig& cfg = options.config;
  const auto seed = std::uint64_t(cfg.integer("seed"));
  StudyOutput out;
  stagnation_table(cfg, out);
  stochastic_tables(cfg, seed, out);
  error_table(cfg, seed, out);
  nlohmann::json formats = nlohmann::json::array();
  for (const auto& name : cfg.strings("stagnation_formats")) formats.push_back(format(name).name);
  out.meta["formats"] = formats;
  out.meta["data_set"] =
      fmt::format("synthetic: constants, and uniform [0, {}) (counter_random)", cfg.number("data_scale"));
  out.meta["seed"] = seed;
  return out;
}

}  // namespace rpsim::sim::study
