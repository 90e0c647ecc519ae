// Accumulation models: the summation algorithms over rounded products, the
// exact model, the Tensor Core model and kernel schedules behind one value
// type. Spec strings: accumulation_spec.hpp; the algorithms:
// accumulation_sums.hpp.
#include "rpsim/accumulation/accumulation.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "accumulation_spec.hpp"
#include "accumulation_sums.hpp"
#include "kernel_fold.hpp"
#include "rpsim/accumulation/error_analysis.hpp"

namespace rpsim::sim {

namespace {

using namespace spec_detail;

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

// A trailing `:seed=N` (stochastic rounding), removed from parts.
std::optional<std::uint64_t> take_seed(std::string_view spec, std::vector<std::string>& parts) {
  if (parts.size() < 2 || parts.back().rfind("seed=", 0) != 0) return std::nullopt;
  std::uint64_t seed = 0;
  try {
    std::size_t used = 0;
    seed = std::stoull(parts.back().substr(5), &used);
    if (used != parts.back().size() - 5) throw std::invalid_argument("trailing text");
  } catch (const std::exception&) {
    bad(spec, fmt::format("'{}' is not seed=<unsigned integer>", parts.back()));
  }
  parts.pop_back();
  return seed;
}

// sequential fma pairwise kahan blocked: an accumulator from parts[first..].
AccumulationModel parse_summation(std::string_view spec, const std::vector<std::string>& parts,
                                  std::uint64_t seed) {
  const std::string& kind = parts[0];
  auto acc_from = [&](std::size_t first) {
    AccumulatorSpec acc;
    if (parts.size() > first) acc.format = parse_fmt(spec, parts[first]);
    if (parts.size() > first + 1) acc.rounding = parse_rnd(spec, parts[first + 1]);
    if (parts.size() > first + 2) bad(spec, fmt::format("unexpected '{}'", parts[first + 2]));
    acc.seed = seed;
    return acc;
  };
  if (kind == "sequential" || kind == "recursive") return AccumulationModel(Sequential{acc_from(1), false});
  if (kind == "fma") return AccumulationModel(Sequential{acc_from(1), true});
  if (kind == "pairwise") return AccumulationModel(Pairwise{acc_from(1)});
  if (kind == "kahan" || kind == "compensated") return AccumulationModel(Kahan{acc_from(1)});
  // blocked:B
  if (parts.size() < 2) bad(spec, "blocked needs a block size, e.g. blocked:32");
  int b = 0;
  try {
    std::size_t used = 0;
    b = std::stoi(parts[1], &used);
    if (used != parts[1].size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    bad(spec, fmt::format("block size '{}' is not an integer", parts[1]));
  }
  if (b < 1) bad(spec, fmt::format("block size {} must be at least 1", b));
  return AccumulationModel(Blocked{b, acc_from(2)});
}

AccumulationModel parse_exact(std::string_view spec, const std::vector<std::string>& parts) {
  Exact e;
  if (parts.size() > 1) e.output = parse_fmt(spec, parts[1]);
  if (parts.size() > 2) e.rounding = parse_rnd(spec, parts[2]);
  if (parts.size() > 3) bad(spec, fmt::format("unexpected '{}'", parts[3]));
  if (e.rounding == RoundingMode::stochastic) bad(spec, "exact takes a deterministic final rounding");
  return AccumulationModel(e);
}

AccumulationModel parse_eigen(std::string_view spec, const std::vector<std::string>& parts) {
  if (parts.size() > 1 && parse_fmt(spec, parts[1]) != formats::binary64())
    bad(spec, fmt::format("eigen computes in binary64 only, not '{}'", parts[1]));
  if (parts.size() > 2 && parse_rnd(spec, parts[2]) != RoundingMode::nearest_even)
    bad(spec, "eigen rounds to nearest even only");
  if (parts.size() > 3) bad(spec, fmt::format("unexpected '{}'", parts[3]));
  return AccumulationModel(EigenGemm{});
}

}  // namespace

AccumulationModel AccumulationModel::parse(std::string_view spec) {
  auto parts = split_colon(spec);
  const auto seed = take_seed(spec, parts);
  const std::string kind = parts[0];
  for (const char* k : {"sequential", "recursive", "fma", "pairwise", "kahan", "compensated", "blocked"})
    if (kind == k) return parse_summation(spec, parts, seed.value_or(0));
  if (kind == "exact") return parse_exact(spec, parts);
  if (seed) bad(spec, fmt::format("{} takes no seed", kind));
  if (kind == "tc") return AccumulationModel(parse_tc(spec, parts));
  if (kind == "kernel") return AccumulationModel(parse_kernel(spec, parts));
  if (kind == "eigen") return parse_eigen(spec, parts);
  KernelPreset preset;
  if (parse_kernel_preset(spec, parts, preset)) return AccumulationModel(std::move(preset));
  bad(spec, fmt::format("unknown kind '{}' (sequential fma pairwise blocked:B kahan exact tc:PRESET "
                        "kernel:GPU:IN:OUT {} eigen)",
                        kind, kernel_preset_names()));
}

AccumulationModel AccumulationModel::from_json(const nlohmann::json& j) {
  if (j.is_string()) return parse(j.get<std::string>());
  if (!j.is_object()) throw std::invalid_argument("accumulation model JSON must be a string or an object");
  auto str = [&](const char* key, const std::string& def) {
    if (!j.contains(key)) return def;
    if (!j[key].is_string())
      throw std::invalid_argument(fmt::format("accumulation model field '{}' must be a string", key));
    return j[key].get<std::string>();
  };
  auto integer = [&](const char* key, long long def) {
    if (!j.contains(key)) return def;
    if (!j[key].is_number_integer())
      throw std::invalid_argument(fmt::format("accumulation model field '{}' must be an integer", key));
    return j[key].get<long long>();
  };
  const std::string kind = str("kind", "");
  if (kind.empty()) throw std::invalid_argument("accumulation model JSON needs \"kind\"");
  if (kind == "tc") {
    // {"kind":"tc","preset":"h100","input":"fp16","output":"fp32",...}: the
    // kernel form with the GPU under "preset" and fp16 -> fp32 by default.
    nlohmann::json k = j;
    k["gpu"] = str("preset", "");
    k["input"] = str("input", "fp16");
    k["output"] = str("output", "fp32");
    k.erase("preset");
    return parse(kernel_json_spec(k));
  }
  if (j.contains("gpu")) return parse(kernel_json_spec(j));  // kernel, cublas, ...
  for (const auto& [key, value] : j.items())
    if (key != "kind" && key != "format" && key != "rounding" && key != "seed" && key != "block")
      throw std::invalid_argument(fmt::format(
          "accumulation model field '{}' is not known for kind {} (format rounding seed block)", key, kind));
  std::string spec = kind;
  if (kind == "blocked") spec += fmt::format(":{}", integer("block", 32));
  const std::string format = str("format", kind == "exact" || kind == "eigen" ? "binary64" : "binary32");
  spec += fmt::format(":{}:{}", format, str("rounding", "rne"));
  if (j.contains("seed")) spec += fmt::format(":seed={}", integer("seed", 0));
  return parse(spec);
}

std::string AccumulationModel::spec() const {
  auto acc_spec = [](const AccumulatorSpec& a) {
    std::string s = fmt::format("{}:{}", a.format.name, rounding_name(a.rounding));
    if (a.rounding == RoundingMode::stochastic) s += fmt::format(":seed={}", a.seed);
    return s;
  };
  return std::visit(
      Overloaded{[&](const Sequential& m) {
                   return fmt::format("{}:{}", m.fused ? "fma" : "sequential", acc_spec(m.acc));
                 },
                 [&](const Pairwise& m) { return "pairwise:" + acc_spec(m.acc); },
                 [&](const Blocked& m) { return fmt::format("blocked:{}:{}", m.block, acc_spec(m.acc)); },
                 [&](const Kahan& m) { return "kahan:" + acc_spec(m.acc); },
                 [&](const Exact& m) {
                   return fmt::format("exact:{}:{}", m.output.name, rounding_name(m.rounding));
                 },
                 [&](const TensorCoreModel& m) { return tc_spec(m); },
                 [&](const KernelSchedule& s) { return kernel_spec(s); },
                 [&](const KernelPreset& p) { return kernel_preset_spec(p); },
                 [&](const EigenGemm&) { return std::string("eigen:binary64"); }},
      model_);
}

const Format& AccumulationModel::input_format() const {
  if (const auto* tc = std::get_if<TensorCoreModel>(&model_)) return tc->input;
  if (const auto* ks = std::get_if<KernelSchedule>(&model_)) return ks->stored;
  if (const auto* kp = std::get_if<KernelPreset>(&model_)) return kp->stored;
  return output_format();
}

RoundingMode AccumulationModel::rounding() const {
  // A kernel schedule: the instruction's normalisation, unless the output
  // conversion is the coarser rounding.
  auto schedule = [](const KernelSchedule& s) {
    return s.output.man_bits < s.instruction.result_bits() ? s.output_rounding : s.instruction.final_rounding;
  };
  return std::visit(Overloaded{[](const TensorCoreModel& m) { return m.final_rounding; },
                               [&](const KernelSchedule& s) { return schedule(s); },
                               [&](const KernelPreset& p) { return schedule(p.for_shape(1, 1, 1)); },
                               [](const Exact& m) { return m.rounding; },
                               [](const EigenGemm&) { return RoundingMode::nearest_even; },
                               [](const auto& m) { return m.acc.rounding; }},
                    model_);
}

double AccumulationModel::unit_roundoff() const {
  return sim::unit_roundoff(output_format(), rounding());
}

const Format& AccumulationModel::output_format() const {
  return std::visit(Overloaded{[](const Exact& m) -> const Format& { return m.output; },
                               [](const TensorCoreModel& m) -> const Format& { return m.output; },
                               [](const KernelSchedule& s) -> const Format& { return s.output; },
                               [](const KernelPreset& p) -> const Format& { return p.output; },
                               [](const EigenGemm&) -> const Format& { return formats::binary64(); },
                               [](const auto& m) -> const Format& { return m.acc.format; }},
                    model_);
}

double AccumulationModel::dot_strided(const double* a, std::ptrdiff_t a_stride, const double* b,
                                      std::ptrdiff_t b_stride, std::size_t k, double c,
                                      std::uint64_t stream) const {
  using namespace acc_detail;
  const Operands o{a, a_stride, b, b_stride, k};
  return std::visit(Overloaded{[&](const Sequential& m) { return sequential(m, o, c, stream); },
                               [&](const Pairwise& m) { return pairwise(m, o, c, stream); },
                               [&](const Blocked& m) { return blocked(m, o, c, stream); },
                               [&](const Kahan& m) { return kahan(m, o, c, stream); },
                               [&](const Exact& m) { return exact(m, o, c); },
                               [&](const TensorCoreModel& m) { return tensor_core(m, o, c); },
                               [&](const KernelSchedule& s) {
                                 return kernel_schedule_dot(s, a, a_stride, b, b_stride, k, c);
                               },
                               [&](const KernelPreset& p) {
                                 return kernel_schedule_dot(p.for_shape(1, 1, static_cast<long>(k)), a,
                                                            a_stride, b, b_stride, k, c);
                               },
                               [&](const EigenGemm&) { return eigen_dot(o, c); }},
                    model_);
}

double AccumulationModel::dot(std::span<const double> a, std::span<const double> b, double c,
                              std::uint64_t stream) const {
  if (a.size() != b.size())
    throw std::invalid_argument(fmt::format("dot: a has {} elements, b has {}", a.size(), b.size()));
  return dot_strided(a.data(), 1, b.data(), 1, a.size(), c, stream);
}

}  // namespace rpsim::sim
