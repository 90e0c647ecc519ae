// Study 2, `tensor-cores`: feature detection by black-box probes (Fasi,
// Higham, Mikaitis & Pranesh 2021, Sec. 4; Khattak & Mikaitis 2025) and the
// GEMM error of every preset against the exact result as K grows.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <Eigen/Core>
#include "rpsim/formats/random.hpp"

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/error_analysis.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "rpsim/study/tensor_cores.hpp"

namespace rpsim::sim::study {

namespace {

double pow2(int e) {
  return std::ldexp(1.0, e);
}

// Builds probe inputs from powers of two, so every product is exact and the
// only rounding left is the one under test.
class Prober {
 public:
  Prober(const DotProduct& dot, const Format& in, const Format& out) : dot_(dot), in_(in), out_(out) {}

  // a*b = 2^e with a and b normal powers of two of the input format.
  std::optional<std::pair<double, double>> split(int e) const {
    std::optional<std::pair<double, double>> best;
    int best_gap = 1 << 30;
    for (int ea = in_.emin; ea <= in_.emax; ++ea) {
      const int eb = e - ea;
      if (eb < in_.emin || eb > in_.emax) continue;
      if (std::abs(ea - eb) < best_gap) best_gap = std::abs(ea - eb), best = std::pair(pow2(ea), pow2(eb));
    }
    return best;
  }

  // The scale 2^s closest to 1 at which every product 2^(s+offset) can be
  // formed and every C = 2^(s+offset) is a normal output value.
  int scale(const std::vector<int>& product_offsets, const std::vector<int>& c_offsets) const {
    for (int step = 0; step < 400; ++step) {
      const int s = step % 2 ? (step + 1) / 2 : -(step / 2);
      bool ok = true;
      for (int o : product_offsets) ok = ok && split(s + o).has_value();
      for (int o : c_offsets) ok = ok && s + o >= out_.emin && s + o < out_.emax;
      if (ok) return s;
    }
    throw std::invalid_argument(
        fmt::format("no probe scale fits inputs {} and output {}", in_.name, out_.name));
  }

  // d = c + sum of products 2^e_i (with signs), at positions 0, 1, ...
  double run(const std::vector<std::pair<int, double>>& products, double c) const {
    std::vector<double> a(products.size(), 0.0), b(products.size(), 0.0);
    for (std::size_t i = 0; i < products.size(); ++i) {
      const auto& [e, sign] = products[i];
      if (sign == 0) continue;
      const auto ab = split(e);
      a[i] = sign * ab->first;
      b[i] = ab->second;
    }
    return dot_(a, b, c);
  }

  double raw(std::span<const double> a, std::span<const double> b, double c) const { return dot_(a, b, c); }
  const Format& in() const { return in_; }
  const Format& out() const { return out_; }

 private:
  const DotProduct& dot_;
  const Format& in_;
  const Format& out_;
};

// Largest k such that c + c*2^-k != c: the fraction bits of the accumulation.
int probe_width(const Prober& p) {
  const int k_max = p.out().man_bits + 6;
  std::vector<int> offsets;
  for (int k = 1; k <= k_max; ++k) offsets.push_back(-k);
  const int s = p.scale(offsets, {0});
  int width = 0;
  for (int k = 1; k <= k_max; ++k) {
    if (p.run({{s - k, 1.0}}, pow2(s)) == pow2(s)) break;
    width = k;
  }
  return width;
}

// C = 2^s(1 + 2^-P) keeps its last bit through a fused step where +2^s and
// -2^s cancel exactly, but not through a rounding of 2^(s+1)(1 + 2^-(P+1)) to
// the output between steps: the first position j of -2^s that changes d is
// the number of terms per step.
std::optional<int> probe_terms(const Prober& p, int width, int max_terms) {
  const int s = p.scale({0}, {0, -width});
  const double c = pow2(s) + pow2(s - width);
  for (int j = 1; j < max_terms; ++j) {
    std::vector<std::pair<int, double>> products(std::size_t(j) + 1, {0, 0.0});
    products[0] = {s, 1.0};
    products[std::size_t(j)] = {s, -1.0};
    if (p.run(products, c) != c) return j;
  }
  return std::nullopt;
}

// 2^j products of 2^(s-P-j) add up to one unit in the last place of C = 2^s
// only if each survives alignment to 2^s: the largest such j is the number of
// alignment bits beyond P. Bit j needs 2^j products in one step.
std::pair<int, bool> probe_extra_bits(const Prober& p, int width, int terms) {
  const int j_max = int(std::floor(std::log2(double(terms))));
  std::vector<int> offsets;
  for (int j = 1; j <= j_max; ++j) offsets.push_back(-width - j);
  if (offsets.empty()) return {0, true};
  const int s = p.scale(offsets, {0, -width});
  int extra = 0;
  for (int j = 1; j <= j_max; ++j) {
    const std::vector<std::pair<int, double>> products(std::size_t(1) << j, {s - width - j, 1.0});
    if (p.run(products, pow2(s)) != pow2(s) + pow2(s - width)) break;
    extra = j;
  }
  return {extra, extra == j_max};
}

// C + 2^s with C = 2^s(1 + k 2^-P) is exact before the final normalisation
// and lands between two output values: a tie for k = 1, 3/4 of the way for
// k = 3. Which way each goes, for both signs, names the rounding mode.
std::optional<RoundingMode> probe_rounding(const Prober& p, int width) {
  if (width < 2) return std::nullopt;
  const int s = p.scale({0}, {0, -width, 1});
  const auto rounds_up = [&](int k, double sign) {
    const double c = sign * (pow2(s) + k * pow2(s - width));
    const double lower = pow2(s + 1) + (k / 2) * pow2(s + 1 - width);  // magnitude below the exact sum
    return std::abs(p.run({{s, sign}}, c)) > lower;
  };
  const bool tie_pos = rounds_up(1, 1), above_pos = rounds_up(3, 1), above_neg = rounds_up(3, -1);
  struct Signature {
    bool tie_pos, above_pos, above_neg;
    RoundingMode mode;
  };
  constexpr Signature table[] = {
      {false, false, false, RoundingMode::toward_zero}, {false, true, true, RoundingMode::nearest_even},
      {true, true, true, RoundingMode::nearest_away},   {true, true, false, RoundingMode::up},
      {false, false, true, RoundingMode::down},         {true, false, false, RoundingMode::odd}};
  for (const auto& sig : table)
    if (sig.tie_pos == tie_pos && sig.above_pos == above_pos && sig.above_neg == above_neg) return sig.mode;
  return std::nullopt;
}

// A subnormal input times a large power of two is a normal product: zero
// means subnormal inputs were flushed.
std::optional<bool> probe_subnormal_inputs(const Prober& p) {
  if (!p.in().subnormals) return std::nullopt;
  const std::vector<double> a{p.in().min_positive()}, b{pow2(p.in().emax)};
  return p.raw(a, b, 0.0) != 0.0;
}

// A subnormal C with no products must come back unchanged.
bool probe_subnormal_outputs(const Prober& p) {
  const double c = p.out().min_normal() / 8;
  const std::vector<double> zero{0.0};
  return p.raw(zero, zero, c) == c;
}

}  // namespace

DetectedFeatures detect_features(const DotProduct& dot, const Format& input, const Format& output,
                                 int max_terms) {
  const Prober p(dot, input, output);
  DetectedFeatures f;
  f.accumulator_fraction_bits = probe_width(p);
  f.terms_per_step = probe_terms(p, f.accumulator_fraction_bits, max_terms);
  std::tie(f.extra_alignment_bits, f.extra_bits_capped) =
      probe_extra_bits(p, f.accumulator_fraction_bits, f.terms_per_step.value_or(max_terms));
  f.final_rounding = probe_rounding(p, f.accumulator_fraction_bits);
  f.subnormal_inputs = probe_subnormal_inputs(p);
  f.subnormal_outputs = probe_subnormal_outputs(p);
  return f;
}

namespace {

std::string mode_name(const std::optional<RoundingMode>& m) {
  return m ? std::string(rounding_name(*m)) : std::string("unknown");
}

std::string tri(const std::optional<bool>& b) {
  return b ? (*b ? "yes" : "no") : "n/a";
}

struct PresetCase {
  std::string gpu, instruction;
  TensorCoreModel model;
};

// Every (preset, instruction, input, output) the presets define.
std::vector<PresetCase> preset_cases(const StudyConfig& cfg) {
  std::vector<std::string> gpus = cfg.strings("presets");
  if (gpus.size() == 1 && gpus[0] == "all") gpus = tensor_core_preset_names();
  std::vector<PresetCase> out;
  for (const auto& gpu : gpus)
    for (const auto& instr : cfg.strings("instructions"))
      for (const auto& in : cfg.strings("inputs"))
        for (const auto& o : cfg.strings("outputs")) {
          TensorCoreModel m;
          try {
            m = tensor_core_preset(gpu, format(in), format(o), instr == "default" ? "" : instr);
          } catch (const std::invalid_argument&) {
            continue;  // this GPU has no such instruction or input format
          }
          out.push_back({gpu, instr, std::move(m)});
        }
  if (out.empty()) throw cfg.error("presets", "selects no preset with the given inputs/outputs/instructions");
  return out;
}

void detection_table(const StudyConfig& cfg, StudyOutput& out) {
  auto& table = out.table(
      "detection.csv",
      {"preset", "instruction", "input_format", "output_format", "accumulator_fraction_bits",
       "terms_per_step", "extra_alignment_bits", "extra_bits_capped", "final_rounding", "subnormal_inputs",
       "subnormal_outputs",
       // The model's own parameters, for checking the probes (never read by them).
       "model_terms_per_step", "model_fraction_bits", "model_result_fraction_bits", "model_final_rounding"});
  const int max_terms = int(cfg.integer("max_terms"));
  int agree = 0, total = 0;
  for (const PresetCase& c : preset_cases(cfg)) {
    const TensorCoreModel& m = c.model;
    const DotProduct dot = [&m](std::span<const double> a, std::span<const double> b, double cc) {
      return tensor_core_dot(m, a, b, cc);
    };
    const DetectedFeatures f = detect_features(dot, m.input, m.output, max_terms);
    table.row(
        c.gpu, c.instruction, m.input.name, m.output.name, f.accumulator_fraction_bits,
        f.terms_per_step ? std::to_string(*f.terms_per_step) : std::string(">") + std::to_string(max_terms),
        f.extra_alignment_bits, f.extra_bits_capped, mode_name(f.final_rounding), tri(f.subnormal_inputs),
        f.subnormal_outputs ? "yes" : "no", m.terms_per_step, m.fraction_bits, m.result_bits(),
        rounding_name(m.final_rounding));
    if (m.output.man_bits == 23) {
      // C added after an instruction's products (c_join after_products*): the
      // probes, which read the steps through C, see the whole instruction as
      // one step, rounded as the C add rounds (Hopper and B200 FP8 mma.sync: 32, rne).
      const bool c_after = m.c_join != CJoin::aligned_with_products;
      const int terms = c_after ? m.instruction_terms() : m.terms_per_step;
      const RoundingMode rounding =
          m.c_join == CJoin::after_products ? RoundingMode::nearest_even : m.final_rounding;
      ++total;
      agree += f.terms_per_step == terms && f.final_rounding == rounding &&
               f.accumulator_fraction_bits + f.extra_alignment_bits == std::min(m.fraction_bits, 23 + 8) &&
               f.accumulator_fraction_bits == std::min(m.result_bits(), m.fraction_bits);
    }
  }
  out.findings.push_back(
      fmt::format("probes recover terms per step, alignment width, accumulator width and rounding of {}/{} "
                  "fp32-output presets",
                  agree, total));
}

void gemm_table(const StudyConfig& cfg, std::uint64_t seed, StudyOutput& out) {
  struct Job {
    std::string label, preset;
    AccumulationModel model;
    std::int64_t k;
  };
  std::vector<AccumulationModel> models;
  std::vector<std::string> presets;
  const Format& output = format(cfg.string("gemm_output"));
  for (const auto& gpu : tensor_core_preset_names()) {
    for (const auto& in : cfg.strings("gemm_inputs")) {
      try {
        models.emplace_back(tensor_core_preset(gpu, format(in), output));
        presets.push_back(gpu);
      } catch (const std::invalid_argument&) {
      }
    }
  }
  for (const auto& spec : cfg.strings("gemm_baselines")) {
    try {
      models.push_back(AccumulationModel::parse(spec));
    } catch (const std::invalid_argument& e) {
      throw cfg.error("gemm_baselines", fmt::format("has a bad model '{}': {}", spec, e.what()));
    }
    presets.push_back("none");
  }
  const auto ks = cfg.numbers("gemm_k");
  const auto rows = cfg.integer("gemm_m"), cols = cfg.integer("gemm_n");
  const double lo = cfg.number("gemm_data_low"), hi = cfg.number("gemm_data_high");
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < models.size(); ++i)
    for (double k : ks) jobs.push_back({models[i].spec(), presets[i], models[i], std::int64_t(k)});
  std::vector<ErrorStats> stats(jobs.size());
  const AccumulationModel exact = AccumulationModel::parse("exact");
#pragma omp parallel for schedule(dynamic)
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    const Format* in = &job.model.input_format();
    // The same matrices for every model of one input format and K.
    Matrix a(rows, job.k), b(job.k, cols);
    for (Eigen::Index r = 0; r < a.rows(); ++r)
      for (Eigen::Index c = 0; c < a.cols(); ++c)
        a(r, c) =
            lo + (hi - lo) * double(counter_random(seed, 1, std::uint64_t(r * a.cols() + c)) >> 11) * 0x1p-53;
    for (Eigen::Index r = 0; r < b.rows(); ++r)
      for (Eigen::Index c = 0; c < b.cols(); ++c)
        b(r, c) =
            lo + (hi - lo) * double(counter_random(seed, 2, std::uint64_t(r * b.cols() + c)) >> 11) * 0x1p-53;
    a = round_to_format(a, *in);
    b = round_to_format(b, *in);
    stats[j] = compare(gemm(job.model, a, b), gemm(exact, a, b), job.model.output_format());
  }
  auto& table = out.table("gemm_error.csv",
                          {"model", "preset", "input_format", "output_format", "k", "m", "n",
                           "max_relative_error", "mean_relative_error", "max_error_ulps", "mean_error_ulps",
                           "rounding", "unit_roundoff", "bound_gamma_k", "bound_sqrt_k_u"});
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    const Format* in = &job.model.input_format();
    const double u = job.model.unit_roundoff();
    const ErrorStats& s = stats[j];
    table.row(job.label, job.preset, in->name, job.model.output_format().name, job.k, rows, cols, s.max_rel,
              s.mean_rel, s.max_ulps, s.mean_ulps, rounding_name(job.model.rounding()), u,
              gamma_n(std::size_t(job.k), u), std::sqrt(double(job.k)) * u);
  }
}

}  // namespace

StudyOutput run_tensor_cores(const StudyOptions& options) {
  const StudyConfig& cfg = options.config;
  const auto seed = std::uint64_t(cfg.integer("seed"));
  StudyOutput out;
  detection_table(cfg, out);
  gemm_table(cfg, seed, out);
  nlohmann::json formats = nlohmann::json::array();
  for (const auto& name : cfg.strings("inputs")) formats.push_back(format(name).name);
  for (const auto& name : cfg.strings("outputs")) formats.push_back(format(name).name);
  out.meta["formats"] = formats;
  out.meta["data_set"] = fmt::format("probes: powers of two; GEMM: uniform [{}, {}) (counter_random)",
                                     cfg.number("gemm_data_low"), cfg.number("gemm_data_high"));
  out.meta["seed"] = seed;
  return out;
}

}  // namespace rpsim::sim::study
