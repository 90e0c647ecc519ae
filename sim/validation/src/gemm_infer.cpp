// The schedule search of gemm_infer.hpp.
#include "rpsim/validation/gemm_infer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "gemm_infer_check.hpp"
#include "gemm_infer_plain.hpp"
#include "gemm_infer_rank.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"

namespace rpsim::sim {

namespace {

using namespace infer_detail;

struct Instruction {
  std::string gpu;
  TensorCoreInstruction kind;
  TensorCoreModel model;
};

// Every distinct instruction preset for these formats (GPUs with the same
// numbers are one candidate: the first listed names it).
std::vector<Instruction> instructions(const Format& in, const Format& out) {
  std::vector<Instruction> found;
  std::set<std::string> seen;
  std::vector<Format> accumulators{formats::binary32()};
  if (out == formats::binary16()) accumulators.push_back(formats::binary16());
  for (const auto& gpu : tensor_core_preset_names())
    for (const TensorCoreInstruction kind : {tc_mma_sync, tc_wgmma})
      for (const auto& acc : accumulators) {
        TensorCoreModel m;
        try {
          m = tensor_core_preset(gpu, in, acc, kind);
        } catch (const std::invalid_argument&) {
          continue;
        }
        const std::string key =
            fmt::format("{} {} {} {} {} {} {} {} {} {} {} {}", m.output.name, m.terms_per_step,
                        m.fraction_bits, m.result_bits(), rounding_name(m.final_rounding), m.subnormal_inputs,
                        m.subnormal_outputs, m.alignment_exponent_floor, static_cast<int>(m.c_join),
                        m.instruction_terms(), m.step_interleave, m.input.name);
        if (seen.insert(key).second) found.push_back({gpu, kind, m});
      }
  return found;
}

// One way of cutting K: split_k, split_tile, promotion.
using Way = std::array<int, 3>;

struct ChunkClass {
  std::vector<std::pair<int, int>> bounds;
  std::vector<Way> ways;  // the first is the one reported
};

// The ways of cutting K, the preferred description of a set of chunks
// first: FP8 instructions with a narrow accumulator (13 bits) are promoted
// (CUTLASS and cuBLAS promote FP8 only), others split K; 64-k tiles, then 32.
std::vector<ChunkClass> chunk_classes(KernelSchedule s, int k) {
  std::vector<Way> splits, promotions;
  for (int tile : {64, 32, 128, 16, 256})
    for (int sk = 2; sk <= 64 && sk <= (k + tile - 1) / tile; ++sk) splits.push_back({sk, tile, 0});
  for (int promo : {1, 2, 4, 8}) promotions.push_back({1, 64, promo});
  const bool narrow = s.instruction.result_bits() < 23;
  std::vector<Way> ways{{1, 64, 0}};
  for (const auto* part : narrow ? std::array{&promotions, &splits} : std::array{&splits, &promotions})
    ways.insert(ways.end(), part->begin(), part->end());
  for (int tile : {64, 128})
    for (int sk = 2; sk <= 4; ++sk)
      for (int promo : {1, 2, 4}) ways.push_back({sk, tile, promo});
  std::vector<ChunkClass> classes;
  std::map<std::vector<std::pair<int, int>>, std::size_t> index;
  for (const Way& w : ways) {
    s.split_k = w[0];
    s.split_tile = w[1];
    s.promotion = w[2];
    std::vector<std::pair<int, int>> bounds;
    for (const auto& c : s.chunks(k)) bounds.emplace_back(c.begin, c.end);
    const auto [it, fresh] = index.emplace(bounds, classes.size());
    if (fresh) classes.push_back({bounds, {}});
    classes[it->second].ways.push_back(w);
  }
  return classes;
}

KernelSchedule with_way(KernelSchedule s, const Way& w) {
  s.split_k = w[0];
  s.split_tile = w[1];
  s.promotion = w[2];
  return s;
}

// Variations of a promising candidate: k order, output rounding, reduction,
// promotion rounding.
void add_variants(const Candidate& base, int k, std::vector<Candidate>& out) {
  const KernelSchedule& s = base.schedule;
  std::set<int> slice_ids;
  for (const auto& c : s.chunks(k)) slice_ids.insert(c.slice);
  const std::size_t slices = slice_ids.size();
  std::vector<KernelSchedule> v{s};
  auto vary = [&](auto&& set, auto values) {
    std::vector<KernelSchedule> next;
    for (const auto& x : v)
      for (const auto& val : values) {
        KernelSchedule y = x;
        set(y, val);
        next.push_back(y);
      }
    v = std::move(next);
  };
  const std::array<RoundingMode, 2> modes{RoundingMode::nearest_even, RoundingMode::toward_zero};
  vary([](KernelSchedule& y, KOrder o) { y.k_order = o; },
       std::array{KOrder::increasing, KOrder::decreasing});
  if (s.output != s.instruction.output)
    vary([](KernelSchedule& y, RoundingMode m) { y.output_rounding = m; }, modes);
  if (s.promotion > 0) vary([](KernelSchedule& y, RoundingMode m) { y.promotion_rounding = m; }, modes);
  if (slices > 1) {
    vary([](KernelSchedule& y, Reduction r) { y.reduction = r; },
         std::array{Reduction::sequential, Reduction::reverse, Reduction::pairwise, Reduction::exact});
    vary([](KernelSchedule& y, RoundingMode m) { y.reduction_rounding = m; }, modes);
    if (s.output != formats::binary32())
      vary([](KernelSchedule& y, const Format& f) { y.reduction_format = f; },
           std::array<Format, 2>{formats::binary32(), s.output});
  }
  // The split-K merges cuBLASLt names (REDUCTION_SCHEME, issue #40): with an
  // output narrower than binary32, partials or a running sum kept in it are
  // other sums than the binary32 workspace.
  const std::size_t plain_variants = v.size();
  if (slices > 1 && s.output != formats::binary32())
    for (std::size_t i = 0; i < plain_variants; ++i)
      if (v[i].reduction == Reduction::sequential && v[i].reduction_format == formats::binary32() &&
          v[i].k_order == KOrder::increasing)
        for (const SplitKMerge m : {SplitKMerge::output_partials, SplitKMerge::serial}) {
          v.push_back(v[i]);
          v.back().merge = m;
        }
  // CUTLASS's residue tile (bitequiv): where a slice is not a whole number of
  // instructions, the short one leads at floor(RES / terms) of the first tile.
  if (s.promotion == 0 && k % s.instruction.instruction_terms() != 0)
    for (const int tile : {32, 64, 128}) {
      v.push_back(s);
      v.back().residue_tile = tile;
    }
  for (auto& x : v)
    if (AccumulationModel(x).spec() != AccumulationModel(s).spec()) out.push_back({x, base.cls});
}

// The other ways of cutting K into the same chunks (the same arithmetic
// under a sequential binary32 reduction, REPORT.md sec. 1).
std::vector<std::string> equivalents(const KernelSchedule& s, const ChunkClass& cls) {
  std::vector<std::string> eq;
  std::set<int> tiles;
  for (const Way& w : cls.ways) {
    if (w == Way{s.split_k, s.split_tile, s.promotion}) continue;
    if (w[2] == 0 && !tiles.insert(w[1]).second) continue;  // the fewest slices per tile only
    std::string d = w[0] > 1 ? fmt::format("split_k={}:split_tile={}", w[0], w[1]) : "";
    if (w[2] > 0) d += fmt::format("{}promotion={}", d.empty() ? "" : ":", w[2]);
    if (!d.empty() && eq.size() < 4) eq.push_back(d);
  }
  return eq;
}

std::vector<Candidate> first_candidates(const InferResult& r, const std::vector<RoundingMode>& conversions,
                                        int k, std::vector<ChunkClass>& classes) {
  std::vector<Candidate> cands;
  for (const auto& ins : instructions(r.input, r.output)) {
    KernelSchedule base;
    base.gpu = ins.gpu;
    base.instruction_kind = ins.kind;
    base.instruction = ins.model;
    base.stored = r.stored;
    base.output = r.output;
    const auto cls = chunk_classes(base, k);
    for (const auto conv : conversions)
      for (const auto& c : cls) {
        base.input_rounding = conv;
        cands.push_back({with_way(base, c.ways.front()), classes.size()});
        classes.push_back(c);
      }
  }
  return cands;
}

// The candidates passing the whole confirm sample, checked on the whole dump.
void whole_exact(const GemmDump& dump, const std::vector<Candidate>& cands,
                 const std::vector<ChunkClass>& classes, std::size_t confirmed, const InferOptions& options,
                 InferResult& r) {
  // Which of them reproduce it, worked out together (fold groups share their chains).
  std::vector<KernelSchedule> perfect;
  for (std::size_t i = 0; i < cands.size() && cands[i].confirm_pass == confirmed; ++i)
    perfect.push_back(cands[i].schedule);
  const auto ok =
      reproduce_all(perfect, dump.a, dump.b, dump.c ? &*dump.c : nullptr, dump.d, options.threads);
  std::set<std::string> done;
  for (std::size_t i = 0; i < perfect.size(); ++i) {
    const auto& c = cands[i];
    const std::string spec = AccumulationModel(c.schedule).spec();
    if (!done.insert(spec).second) continue;
    if (!ok[i]) continue;
    if (r.exact.size() == options.max_exact) {
      r.truncated = true;
      break;
    }
    // Every element bit-exact: 0 ulps each, as check_gemm would count them.
    const auto total = std::size_t(dump.d.size());
    r.exact.push_back({spec, equivalents(c.schedule, classes[c.cls]), total, total, 0.0, 0.0, "", ""});
  }
}

// While nothing reproduces the dump: the best `top` candidates on the whole
// dump (r.best may hold plain models already; ranked together at the end).
void whole_best(const GemmDump& dump, const std::vector<Candidate>& cands,
                const std::vector<ChunkClass>& classes, const InferOptions& options, InferResult& r) {
  for (std::size_t i = 0, added = 0; i < cands.size() && added < options.top; ++i) {
    const std::string spec = AccumulationModel(cands[i].schedule).spec();
    if (std::any_of(r.best.begin(), r.best.end(), [&](const auto& b) { return b.spec == spec; })) continue;
    const auto check = check_gemm(dump, AccumulationModel(cands[i].schedule), 0, options.threads);
    r.best.push_back({spec, equivalents(cands[i].schedule, classes[cands[i].cls]), check.passed, check.total,
                      check.max_ulps, check.mean_ulps, "", ""});
    ++added;
  }
  std::stable_sort(r.best.begin(), r.best.end(), ranks_before);
}

// Stages 2 and 3 when the ranking below the reproducing candidates is not
// wanted: the variations of the best four survivors on the confirm sample
// and those who reproduce it in the order the counted stages put them
// first, each only asked whether it does (stopping at the first miss; the
// survivors are counted only when fewer than four reproduce the sample, as
// the best four then depend on the counts); those that do are checked whole.
// False, r untouched, when nothing reproduces the dump (the best are then
// ranked by their counts).
bool exact_first(const GemmDump& dump, std::vector<Candidate> cands, const std::vector<ChunkClass>& classes,
                 const Sample& confirm, int k, const InferOptions& options, InferResult& r) {
  const std::size_t confirmed = std::size_t(confirm.d.size()), bases = std::min<std::size_t>(4, cands.size());
  auto perfect_of = [&](const std::vector<Candidate>& from, std::vector<Candidate>& into) {
    std::vector<KernelSchedule> all;
    for (const Candidate& c : from) all.push_back(c.schedule);
    const auto ok = reproduce_all(all, confirm.a, confirm.b, &confirm.c, confirm.d, options.threads);
    for (std::size_t i = 0; i < from.size(); ++i)
      if (ok[i]) {
        into.push_back(from[i]);
        into.back().confirm_pass = confirmed;
      }
  };
  std::vector<Candidate> perfect, variants;
  perfect_of(cands, perfect);
  if (perfect.size() < bases) {
    score_all(cands, confirm, options.threads, &Candidate::confirm_pass);
    std::stable_sort(cands.begin(), cands.end(), by(&Candidate::confirm_pass));
    for (std::size_t i = 0; i < bases; ++i) add_variants(cands[i], k, variants);
  } else {
    for (std::size_t i = 0; i < bases; ++i) add_variants(perfect[i], k, variants);
  }
  perfect_of(variants, perfect);
  InferResult trial = r;
  whole_exact(dump, perfect, classes, confirmed, options, trial);
  if (trial.exact.empty()) return false;
  trial.candidates += classes.size() + variants.size();
  r = std::move(trial);
  return true;
}

// What --infer names beside a candidate: its kernel family.
std::string family_of(const std::string& spec, int k) {
  const AccumulationModel m = AccumulationModel::parse(spec);
  if (const auto* s = std::get_if<KernelSchedule>(&m.variant()))
    return m.bare_instruction() ? "one Tensor Core chain" : schedule_family(*s, k);
  return "plain accumulation model";
}

// A preset missing an element of the confirm sample (a subset of D) misses
// it on the whole dump too: only the others cost a whole GEMM.
void named_presets(const GemmDump& dump, const Sample& confirm, const InferOptions& options, InferResult& r) {
  for (const auto& row : kernel_presets()) {
    try {
      const AccumulationModel p(kernel_preset(row.name, r.input, r.output, 0));
      check_dump_formats(dump, p);
      // The schedule the preset picks for the whole dump's shape, not the sample's.
      const auto s =
          std::get<KernelPreset>(p.variant()).for_shape(dump.a.rows(), dump.b.cols(), dump.a.cols());
      // A schedule the search found reproducing needs no second GEMM.
      const std::string spec = AccumulationModel(s).spec();
      if (std::any_of(r.exact.begin(), r.exact.end(), [&](const auto& e) { return e.spec == spec; }) ||
          (reproduces(s, confirm.a, confirm.b, &confirm.c, confirm.d, options.threads) &&
           reproduces(s, dump.a, dump.b, dump.c ? &*dump.c : nullptr, dump.d, options.threads)))
        r.presets.push_back(p.spec());
    } catch (const std::invalid_argument&) {
      // The preset does not take these formats or values.
    }
  }
}

}  // namespace

bool ranks_before(const InferredSchedule& x, const InferredSchedule& y) {
  if (x.passed != y.passed) return x.passed > y.passed;
  if (x.max_ulps != y.max_ulps) return x.max_ulps < y.max_ulps;
  return x.mean_ulps < y.mean_ulps;
}

InferResult infer_schedule(const GemmDump& dump, const InferOptions& options) {
  InferResult r;
  // Finite inputs only, as under --model (check_dump_formats says why).
  check_dump_formats(dump, AccumulationModel(Exact{formats::binary64(), RoundingMode::nearest_even}));
  std::vector<RoundingMode> conversions;
  value_formats(dump, r, conversions);
  const int k = static_cast<int>(dump.a.cols());
  // Stage 1: every instruction, conversion and way of cutting K, on a small sample.
  std::vector<ChunkClass> classes;
  std::vector<Candidate> cands = first_candidates(r, conversions, k, classes);
  const Sample screen = sample_of(dump, options.sample);
  const Sample confirm = sample_of(dump, options.confirm);
  // Plain models first (those the sample cannot tell from a reproduction):
  // when one reproduces the dump, the schedules' best need not be worked out.
  const PlainSample plain{screen.a, screen.b, screen.c, screen.d};
  const PlainSample plain_confirm{confirm.a, confirm.b, confirm.c, confirm.d};
  PlainPass plain_pass;
  infer_plain_models(dump, plain, plain_confirm, r.stored, r.output, options, true, plain_pass, r);
  constexpr std::size_t kKept = 16;
  screen_all(cands, screen, options.threads, kKept);
  std::stable_sort(cands.begin(), cands.end(), by(&Candidate::sample_pass));
  // Stage 2: the perfect ones (or the best 16) on a larger sample; then the
  // variations (order, reductions, roundings) of the best four there.
  std::size_t keep = 0;
  while (keep < cands.size() && (cands[keep].sample_pass == std::size_t(screen.d.size()) || keep < kKept))
    ++keep;
  cands.resize(keep);
  if (!options.exact_first || !exact_first(dump, cands, classes, confirm, k, options, r)) {
    score_all(cands, confirm, options.threads, &Candidate::confirm_pass);
    std::stable_sort(cands.begin(), cands.end(), by(&Candidate::confirm_pass));
    std::vector<Candidate> variants;
    for (std::size_t i = 0; i < cands.size() && i < 4; ++i) add_variants(cands[i], k, variants);
    score_all(variants, confirm, options.threads, &Candidate::confirm_pass);
    r.candidates += classes.size() + variants.size();
    cands.insert(cands.end(), variants.begin(), variants.end());
    std::stable_sort(cands.begin(), cands.end(), by(&Candidate::confirm_pass));
    // Stage 3: the whole dump.
    whole_exact(dump, cands, classes, std::size_t(confirm.d.size()), options, r);
    if (r.exact.empty()) whole_best(dump, cands, classes, options, r);
  }
  // While nothing reproduces the dump: the best plain models too, ranked with the schedules.
  if (r.exact.empty())
    infer_plain_models(dump, plain, plain_confirm, r.stored, r.output, options, false, plain_pass, r);
  if (r.best.size() > options.top) r.best.resize(options.top);
  named_presets(dump, confirm, options, r);
  for (auto* list : {&r.exact, &r.best})
    for (auto& s : *list) s.family = family_of(s.spec, k);
  return r;
}

}  // namespace rpsim::sim
