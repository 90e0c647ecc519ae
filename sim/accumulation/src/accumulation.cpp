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
#include "rpsim/accumulation/accumulation_kinds.hpp"
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

}  // namespace

AccumulationModel::AccumulationModel(const TensorCoreModel& m) : model_(KernelSchedule::of_instruction(m)) {}

const TensorCoreModel* AccumulationModel::bare_instruction() const {
  // of_instruction's schedule: no preset GPU named, one plain chain.
  const auto* s = std::get_if<KernelSchedule>(&model_);
  return s && s->gpu.empty() && s->is_plain_chain() ? &s->instruction : nullptr;
}

AccumulationModel AccumulationModel::parse(std::string_view spec) {
  auto parts = split_colon(spec);
  const auto seed = take_seed(spec, parts);
  const AccumulationKind* kind = find_accumulation_kind(parts[0]);
  if (!kind)
    bad(spec, fmt::format("unknown kind '{}' ({}; LIB:GPU one of {})", parts[0], accumulation_kind_names(),
                          kernel_preset_names()));
  if (seed && !kind->takes_seed) bad(spec, fmt::format("{} takes no seed", parts[0]));
  return kind->parse(spec, parts, seed.value_or(0));
}

AccumulationModel AccumulationModel::from_json(const nlohmann::json& j) {
  if (j.is_string()) return parse(j.get<std::string>());
  if (!j.is_object()) throw AccumulationSpecError("accumulation model JSON must be a string or an object");
  if (!j.contains("kind")) throw AccumulationSpecError("accumulation model JSON needs \"kind\"");
  if (!j["kind"].is_string()) throw AccumulationSpecError("accumulation model field 'kind' must be a string");
  const std::string name = j["kind"].get<std::string>();
  const AccumulationKind* kind = find_accumulation_kind(name);
  if (!kind) bad(j.dump(), fmt::format("unknown kind '{}' ({})", name, accumulation_kind_names()));
  if (j.contains("seed") && !kind->takes_seed) bad(j.dump(), fmt::format("{} takes no seed", name));
  return kind->from_json(j);
}

std::string AccumulationModel::spec() const {
  const AccumulationKind& kind = accumulation_kind_of(*this);
  return kind.spec(*this);
}

double AccumulationModel::plan_seconds_per_multiply_add() const {
  return accumulation_kind_of(*this).seconds_per_multiply_add(*this);
}

const Format& AccumulationModel::input_format() const {
  if (const auto* ks = std::get_if<KernelSchedule>(&model_)) return ks->stored;
  if (const auto* kp = std::get_if<KernelPreset>(&model_)) return kp->stored;
  return output_format();
}

RoundingMode AccumulationModel::rounding() const {
  // A kernel schedule: the instruction's normalisation, unless the output
  // conversion is the coarser rounding.
  // A bare instruction: its own normalisation.
  auto schedule = [](const KernelSchedule& s) {
    if (s.gpu.empty() && s.is_plain_chain()) return s.instruction.final_rounding;
    return s.output.man_bits < s.instruction.result_bits() ? s.output_rounding : s.instruction.final_rounding;
  };
  return std::visit(Overloaded{[&](const KernelSchedule& s) { return schedule(s); },
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
                               [&](const KernelSchedule& s) {
                                 // A bare instruction: its chain directly,
                                 // without the 1 x K GEMM around it.
                                 if (const TensorCoreModel* m = bare_instruction())
                                   return tensor_core(*m, o, c);
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
