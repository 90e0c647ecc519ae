// Kernel schedules (kernel_schedule.hpp): validation, the chunks of K, and
// the table of fields a spec may set.
#include "rpsim/accumulation/kernel_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
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
constexpr const char* kMerges[] = {"workspace", "output_partials", "serial"};
constexpr const char* kSimt[] = {"none", "gemmsn", "gemv", "gemv_slices", "dot"};
constexpr const char* kCombines[] = {"sequential", "butterfly"};

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
      RPSIM_INT_FIELD(residue_tile,
                      "k-tile R (0: none): a slice's first L%R products are a partial tile first"),
      RPSIM_INT_FIELD(promotion, "instructions per chunk promoted into binary32 (0: none)"),
      RPSIM_ROUNDING_FIELD(promotion_rounding, "rounding of the binary32 promotion adds"),
      RPSIM_ENUM_FIELD(k_order, KOrder, kOrders, "order of a chunk's k-blocks"),
      RPSIM_ENUM_FIELD(reduction, Reduction, kReductions, "order the slices' partials are added"),
      RPSIM_ENUM_FIELD(merge, SplitKMerge, kMerges,
                       "split-K merge: binary32 workspace, partials in the output format, or a serial "
                       "chain kept in the output format (cuBLASLt REDUCTION_SCHEME)"),
      RPSIM_FORMAT_FIELD(reduction_format, "format of the partials and their sum"),
      RPSIM_ROUNDING_FIELD(reduction_rounding, "rounding of the reduction's adds"),
      RPSIM_ENUM_FIELD(c_placement, CPlacement, kPlacements, "C added in the epilogue or as the start"),
      RPSIM_ENUM_FIELD(scale_epilogue, ScaleEpilogue, kScaleEpilogues,
                       "_scaled_mm scales in binary32: fl(fl(sa*sb)*acc), fl(sb*fl(sa*acc)), fma with C or "
                       "fl(sa*fl(sb*acc))"),
      RPSIM_ROUNDING_FIELD(output_rounding, "rounding of the result to the output format"),
      RPSIM_ENUM_FIELD(simt, SimtOrder, kSimt,
                       "a cuBLAS CUDA-core kernel's order instead of the Tensor Core chain"),
      RPSIM_INT_FIELD(simt_threads, "simt: threads per output (gemmsn) or lanes (gemv, gemv_slices)"),
      RPSIM_INT_FIELD(simt_sub,
                      "simt: sub-block length (gemmsn, gemv_slices) or tiles per chunk (gemv); 0: one"),
      RPSIM_INT_FIELD(simt_vector, "simt: consecutive products a lane loads at once (gemv, dot)"),
      RPSIM_ENUM_FIELD(simt_combine, LaneCombine, kCombines,
                       "simt gemv: lanes added in order or by a butterfly"),
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
  if (residue_tile < 0 || residue_tile > 65536)
    bad_field(*this, fmt::format("residue_tile {} not in 0..65536", residue_tile));
  // CUTLASS's residue tile belongs to its mma.sync kernels, which neither
  // promote (FP8 runs on nvjet: bitequiv) nor walk K backwards.
  if (residue_tile > 0 && (promotion > 0 || k_order == KOrder::decreasing))
    bad_field(*this, "residue_tile needs promotion=0 and k_order=increasing");
  if (merge != SplitKMerge::workspace && reduction != Reduction::sequential)
    bad_field(*this, fmt::format("merge={} adds the partials in slice order: it needs reduction=sequential",
                                 kMerges[static_cast<int>(merge)]));
  if (stored.bits > 32 || stored.exp_bits > 8)
    bad_field(*this, fmt::format("stored format {} is wider than binary32", stored.name));
  if (reduction_format.bits > 32 || reduction_format.exp_bits > 8)
    bad_field(*this, fmt::format("reduction_format {} is wider than binary32", reduction_format.name));
  if (output.bits > 32 || output.exp_bits > 8)
    bad_field(*this, fmt::format("output format {} is wider than binary32", output.name));
  if (simt != SimtOrder::none) {
    if (simt_threads < 1 || simt_threads > 1024 || simt_sub < 0 || simt_sub > 65536 || simt_vector < 1 ||
        simt_vector > 64)
      bad_field(*this, "simt_threads must be in 1..1024, simt_sub in 0..65536, simt_vector in 1..64");
    if ((simt == SimtOrder::gemv && simt_combine == LaneCombine::butterfly) &&
        (simt_threads & (simt_threads - 1)) != 0)
      bad_field(*this, fmt::format("a butterfly needs a power-of-two simt_threads, not {}", simt_threads));
    // One binary32 FMA chain per thread from zero: no promotion, no residue
    // tile, C in cuBLAS's epilogue (beta * C).
    if (promotion > 0 || residue_tile > 0 || c_placement != CPlacement::epilogue ||
        k_order != KOrder::increasing)
      bad_field(*this,
                "simt orders need promotion=0, residue_tile=0, c_placement=epilogue, k_order=increasing");
  }
  for (const RoundingMode m : {input_rounding, promotion_rounding, reduction_rounding, output_rounding})
    if (!deterministic(m)) bad_field(*this, "stochastic rounding is not a kernel-schedule mode");
}

std::vector<KChunk> KernelSchedule::chunks(int k) const {
  std::vector<KChunk> out;
  if (k <= 0) return {KChunk{0, 0, 0}};
  // cuBLAS's split: ceil(tiles / S) tiles per slice, the last slice shorter
  // (REPORT.md sec. 1: 1408, 1408, 1280 for K = 4096, S = 3, tile 64).
  // The dot kernel's blocks are strided over K, not slices of it: its order
  // (kernel_simt.cpp) runs them inside one chunk.
  const long slices = simt == SimtOrder::dot ? 1 : split_k;
  const long tiles = (static_cast<long>(k) + split_tile - 1) / split_tile;
  const long per = (tiles + slices - 1) / slices * split_tile;
  const long chunk = promotion > 0 ? static_cast<long>(promotion) * instruction.instruction_terms() : 0;
  int slice = 0;
  for (long s = 0; s < k; s += per, ++slice) {
    const long e = std::min<long>(s + per, k);
    if (chunk == 0 || e - s <= chunk) {
      // CUTLASS's residue: the slice's L % R leading products (bitequiv:
      // the partial MMA at index floor(RES / KPD) of the first tile).
      const long lead = residue_tile > 0 ? (e - s) % residue_tile : 0;
      out.push_back({static_cast<int>(s), static_cast<int>(e), slice, static_cast<int>(lead)});
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

namespace rpsim::sim {

std::string schedule_family(const KernelSchedule& s, int k) {
  if (s.simt != SimtOrder::none) {
    switch (s.simt) {
      case SimtOrder::gemmsn:
        return s.simt_threads == 1 && s.simt_sub == 0
                   ? "CUDA-core one FFMA chain (magma_sgemmEx)"
                   : fmt::format("CUDA-core gemmSN ({} threads, sub-blocks of {})", s.simt_threads,
                                 s.simt_sub > 0 ? std::to_string(s.simt_sub) : "one");
      case SimtOrder::gemv:
        return fmt::format("CUDA-core gemv ({} lanes x {}, {} combine)", s.simt_threads, s.simt_vector,
                           s.simt_combine == LaneCombine::butterfly ? "butterfly" : "in-order");
      case SimtOrder::gemv_slices:
        return fmt::format("CUDA-core gemv, contiguous lanes ({} lanes, chunks of {})", s.simt_threads,
                           s.simt_sub);
      default: return fmt::format("CUDA-core dot ({} blocks, reduce_1Block)", s.split_k);
    }
  }
  const auto chunks = s.chunks(k);
  const int slices = chunks.empty() ? 1 : chunks.back().slice + 1;
  std::string out = s.promotion > 0
                        ? fmt::format("FP8 two-level: promoted every {} instructions", s.promotion)
                        : "one Tensor Core chain";
  if (slices > 1) {
    constexpr const char* merges[] = {"binary32 workspace", "partials in the output format",
                                      "serial in the output format"};
    out = fmt::format("split-K {} x {}-k tiles, {}{}", slices, s.split_tile,
                      merges[static_cast<int>(s.merge)], s.promotion > 0 ? ", " + out : "");
  }
  const bool lead = std::any_of(chunks.begin(), chunks.end(), [](const KChunk& c) { return c.lead > 0; });
  if (s.residue_tile > 0)
    out += fmt::format("; CUTLASS residue tile {}{}", s.residue_tile, lead ? " (a partial tile leads)" : "");
  return out;
}

}  // namespace rpsim::sim
