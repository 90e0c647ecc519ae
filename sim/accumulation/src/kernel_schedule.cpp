// Kernel schedules (kernel_schedule.hpp): validation, the chunks of K, and
// the table of fields a spec may set.
#include "rpsim/accumulation/kernel_schedule.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "accumulation_spec.hpp"

namespace rpsim::sim {

namespace {

[[noreturn]] void bad_field(const KernelSchedule& s, const std::string& why) {
  throw std::invalid_argument(fmt::format("kernel schedule over '{}': {}", s.instruction.name, why));
}

bool deterministic(RoundingMode m) {
  return m != RoundingMode::stochastic;
}

RoundingMode rounding_field(const char* name, const std::string& v) {
  try {
    const RoundingMode m = parse_rounding(v);
    if (deterministic(m)) return m;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(fmt::format("{}='{}' is not one of {}", name, v, rounding_names(" ", true)));
}

Format format_field(const char* name, const std::string& v) {
  try {
    return parse_format(v);
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("{}='{}': {}", name, v, e.what()));
  }
}

template <class E, std::size_t N>
E enum_field(const char* name, const std::string& v, const char* const (&names)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (v == names[i]) return static_cast<E>(i);
  throw std::invalid_argument(fmt::format("{}='{}' is not one of {}", name, v, fmt::join(names, " ")));
}

constexpr const char* kOrders[] = {"increasing", "decreasing"};
constexpr const char* kReductions[] = {"sequential", "reverse", "pairwise", "exact"};
constexpr const char* kPlacements[] = {"epilogue", "accumulator"};
constexpr const char* kScaleEpilogues[] = {"product", "a_then_b", "fused", "b_then_a"};

#define RPSIM_INT_FIELD(f, help)                                                                      \
  ScheduleField {                                                                                     \
#f, help,                                                                                         \
        [](const KernelSchedule&                                                                      \
               s) { return std::to_string(s.f); }, [](KernelSchedule & s,                             \
                                                      const std::string&                              \
                                                          v) { s.f = spec_detail::field_int(#f, v); } \
  }
#define RPSIM_ROUNDING_FIELD(f, help)                                                                     \
  ScheduleField {                                                                                         \
#f, help,                                                                                             \
        [](const KernelSchedule&                                                                          \
               s) { return std::string(rounding_name(s.f)); }, [](KernelSchedule & s,                     \
                                                                  const std::string&                      \
                                                                      v) { s.f = rounding_field(#f, v); } \
  }
#define RPSIM_FORMAT_FIELD(f, help)                                                                      \
  ScheduleField {                                                                                        \
#f, help, [](const KernelSchedule& s) { return s.f.name; }, [](KernelSchedule & s,                   \
                                                                   const std::string&                    \
                                                                       v) { s.f = format_field(#f, v); } \
  }
#define RPSIM_ENUM_FIELD(f, type, names, help)                                                     \
  ScheduleField {                                                                                  \
#f, help, [](const KernelSchedule& s) { return std::string(names[static_cast<int>(s.f)]); },     \
        [](KernelSchedule& s, const std::string& v) { s.f = enum_field<type>(#f, v, names); } \
  }

}  // namespace

const std::vector<ScheduleField>& schedule_fields() {
  static const std::vector<ScheduleField> fields{
      RPSIM_FORMAT_FIELD(stored, "format A and B come in (default: the instruction's input)"),
      RPSIM_ROUNDING_FIELD(input_rounding, "conversion of stored values to the instruction's input"),
      RPSIM_INT_FIELD(split_k, "split-K slices S"),
      RPSIM_INT_FIELD(split_tile, "k per tile: a slice is ceil(ceil(K/tile)/S) tiles"),
      RPSIM_INT_FIELD(promotion, "instructions per chunk promoted into binary32 (0: none)"),
      RPSIM_ROUNDING_FIELD(promotion_rounding, "rounding of the binary32 promotion adds"),
      RPSIM_ENUM_FIELD(k_order, KOrder, kOrders, "order of a chunk's k-blocks"),
      RPSIM_ENUM_FIELD(reduction, Reduction, kReductions, "order the slices' partials are added"),
      RPSIM_FORMAT_FIELD(reduction_format, "format of the partials and their sum"),
      RPSIM_ROUNDING_FIELD(reduction_rounding, "rounding of the reduction's adds"),
      RPSIM_ENUM_FIELD(c_placement, CPlacement, kPlacements, "C added in the epilogue or as the start"),
      RPSIM_ENUM_FIELD(scale_epilogue, ScaleEpilogue, kScaleEpilogues,
                       "_scaled_mm scales in binary32: fl(fl(sa*sb)*acc), fl(sb*fl(sa*acc)), fma with C or "
                       "fl(sa*fl(sb*acc))"),
      RPSIM_ROUNDING_FIELD(output_rounding, "rounding of the result to the output format"),
  };
  return fields;
}
#undef RPSIM_INT_FIELD
#undef RPSIM_ROUNDING_FIELD
#undef RPSIM_FORMAT_FIELD
#undef RPSIM_ENUM_FIELD

const ScheduleField* find_schedule_field(std::string_view name) {
  for (const auto& f : schedule_fields())
    if (name == f.name) return &f;
  return nullptr;
}

void KernelSchedule::validate() const {
  instruction.validate();
  if (split_k < 1 || split_k > 4096) bad_field(*this, fmt::format("split_k {} not in 1..4096", split_k));
  if (split_tile < 1 || split_tile > 65536)
    bad_field(*this, fmt::format("split_tile {} not in 1..65536", split_tile));
  if (promotion < 0 || promotion > 65536)
    bad_field(*this, fmt::format("promotion {} not in 0..65536", promotion));
  if (stored.bits > 32 || stored.exp_bits > 8)
    bad_field(*this, fmt::format("stored format {} is wider than binary32", stored.name));
  if (reduction_format.bits > 32 || reduction_format.exp_bits > 8)
    bad_field(*this, fmt::format("reduction_format {} is wider than binary32", reduction_format.name));
  if (output.bits > 32 || output.exp_bits > 8)
    bad_field(*this, fmt::format("output format {} is wider than binary32", output.name));
  for (const RoundingMode m : {input_rounding, promotion_rounding, reduction_rounding, output_rounding})
    if (!deterministic(m)) bad_field(*this, "stochastic rounding is not a kernel-schedule mode");
}

std::vector<KChunk> KernelSchedule::chunks(int k) const {
  std::vector<KChunk> out;
  if (k <= 0) return {KChunk{0, 0, 0}};
  // cuBLAS's split: ceil(tiles / S) tiles per slice, the last slice shorter
  // (REPORT.md sec. 1: 1408, 1408, 1280 for K = 4096, S = 3, tile 64).
  const long tiles = (static_cast<long>(k) + split_tile - 1) / split_tile;
  const long per = (tiles + split_k - 1) / split_k * split_tile;
  const long chunk = promotion > 0 ? static_cast<long>(promotion) * instruction.instruction_terms() : 0;
  int slice = 0;
  for (long s = 0; s < k; s += per, ++slice) {
    const long e = std::min<long>(s + per, k);
    if (chunk == 0 || e - s <= chunk) {
      out.push_back({static_cast<int>(s), static_cast<int>(e), slice});
      continue;
    }
    for (long c = s; c < e; c += chunk)
      out.push_back({static_cast<int>(c), static_cast<int>(std::min(c + chunk, e)), slice});
  }
  return out;
}

KernelSchedule KernelSchedule::of_instruction(const TensorCoreModel& m) {
  KernelSchedule s;
  s.gpu.clear();  // not a preset-built schedule: spec() writes the tc: model
  s.instruction = m;
  s.stored = m.input;
  s.c_placement = CPlacement::accumulator;
  s.reduction_format = m.output;
  s.output = m.output;
  return s;
}

bool KernelSchedule::is_plain_chain() const {
  return split_k == 1 && promotion == 0 && k_order == KOrder::increasing &&
         c_placement == CPlacement::accumulator && stored == instruction.input &&
         output == instruction.output;
}

}  // namespace rpsim::sim
