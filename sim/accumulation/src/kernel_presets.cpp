// Named kernel schedules: one row per library and GPU, each a rule choosing
// the schedule (kernel_schedule.hpp) from the GEMM's shape and formats.
//
// Evidence: /work/shared/cublas-h100 (24 GEMMs returned by torch.matmul /
// torch._scaled_mm on an H100 80GB HBM3, PyTorch 2.11, CUDA 13.0, cuBLAS
// 13.0), captures on an H200 (the same SM90 chip; real GPT / LLaMA-style /
// ResNet steps and shape grids, torch 2.11 + cuBLAS 13; excerpt in
// tests/data/cublas-h200), H100 torch._scaled_mm captures with per-row scales
// and biases (lead's GPU session 10, capture4.py; excerpt in
// tests/data/cublas-h100-scaled) and the research report that fitted the H100 ones, REPORT.md of issue #14
// (numpy reference emu.py / schedule.py / verify.py). Pass counts below are
// elements bit-exact out of M*N, per shape 64x64x256 / 256x128x1024 /
// 128x128x4096 (4096 / 32768 / 16384 elements).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "cublas_h100_guess.hpp"
#include "rpsim/accumulation/cublas_table.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/accumulation/tensor_core_operands.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"

namespace rpsim::sim {

namespace {

using cublas_detail::Kind;

// The operand class (tensor_core_operands.hpp) as the kernels' kind.
Kind kind_of(const Format& f) {
  const auto* c = tensor_core_operand_class(f);
  switch (c ? c->input_bit : 0) {
    case tc_fp16: return Kind::fp16;
    case tc_bf16: return Kind::bf16;
    case tc_tf32: return Kind::tf32;
    case tc_fp8: return Kind::fp8;
    default: break;
  }
  throw std::invalid_argument(fmt::format("takes fp16, bf16, tf32, e4m3 or e5m2 inputs, not '{}'", f.name));
}

// The preset spec's short name of a format (fp16, bf16, tf32, e4m3, fp32).
std::string short_name(const Format& f) {
  if (f == formats::binary16()) return "fp16";
  if (f == formats::bfloat16()) return "bf16";
  if (f == formats::binary32()) return "fp32";
  return f.name;
}

// The heuristic table's kind for a preset's GEMMs (sim/accumulation/tables/
// cublas-shapes.json names them): IN[xB]:OUT[:rprR][:fast][:rowwise]; rpr
// (torch's allow_*_reduced_precision_reduction) for fp16 and bf16 outputs,
// where it masks cuBLASLt's output-type reduction.
std::string table_kind(const KernelPreset& p) {
  const std::string b = p.input_b ? short_name(*p.input_b) : std::string();
  const bool narrow = p.output == formats::binary16() || p.output == formats::bfloat16();
  return fmt::format("{}{}{}:{}{}{}{}", short_name(p.input), b.empty() ? "" : "x", b, short_name(p.output),
                     narrow ? (p.rpr ? ":rpr1" : ":rpr0") : "", p.fast_accum ? ":fast" : "",
                     p.row_scales ? ":rowwise" : "");
}

// cuBLAS on the H100. The instruction is the H100 preset with a binary32
// accumulator for every output format (fp16/bf16 16 products per step, tf32
// 8, 25 bits kept, RTZ normalisation; e4m3/e5m2 the wgmma FP8 datapath, 32
// per step, 13-bit accumulator): accumulating in the output format (the
// h100 fp16->fp16 preset, RNE to binary16 each step) matches only 1537 /
// 6747 / 1772 of fp16->fp16. The binary32 result is rounded to nearest even
// to fp16 or bf16 (a double rounding after the RTZ step: without it one
// element per fp16 file differs, 4095/4096 and 32767/32768).
//
// tf32: A and B are binary32 and rounded to tf32 to nearest even before
// the products: D lies within ~1 ulp of the exact product of the RNE-rounded
// inputs (rms 1.9e-6, against 4.6e-3 for the raw binary32 inputs). With
// ties away (RNA) 4032 / 29658 / 9473 match; truncation (the hardware's
// reading of raw binary32 bits) 0 / 1 / 0; raw binary32 inputs 1 / 5 / 1.
//
// FP8 (torch._scaled_mm, use_fast_accum=False): the wgmma accumulator is
// promoted into binary32 every 4 k-blocks of 32 (128 k; CUTLASS's default
// mma_promotion_interval = 4), at every shape: 100% for ->fp32 and ->bf16.
// No promotion (one 13-bit chain) 714 / 472 / 24 (->fp32); every 1, 2 or 8
// k-blocks at most 905 of 32768; 16 or 64 products per step, 12, 14 or 15
// bits, RNE steps all far below. Extra split-K at multiples of 128 and RTZ
// promotion adds give the same bits on these data and on fresh random data
// of the same shapes (REPORT.md sec. 3): not pinned, and immaterial here.
//
// use_fast_accum=True (fast_accum=1): no promotion, the whole K one 13-bit
// wgmma chain. H200 (cuBLAS 13, fast-k-one, K 32..2048, ->bf16 and ->fp32):
// 20/20 GEMMs bit-exact; promotion every 4 k-blocks (the slow path) matches
// only up to K = 128, where both are one chain (K = 2048: 3346 of 4096 ->bf16,
// 19 ->fp32), every 8: 29 of 4096 (->fp32). The "up to 2e9 ulps" of ->fp32
// is no separate effect: the 13-bit chain's error is absolute, and where the
// sum cancels to near zero a binary32 ulp is tiny and the sign may differ
// (ulps are counted through zero); ->bf16 hides most of it in its rounding.
// The same chain reproduces the fast calls of scaled-tensor (per-tensor
// scales), scaled-rowwise and mixed (e4m3 x e5m2 and e5m2 x e4m3).
//
// Mixed FP8 pairs (input_b): the wgmma row with B's format (kind::f8f6f4's
// e4m3 x e5m2): H200 mixed captures, both orders, fast and not, 32/32.
//
// rpr: the red0 and red1 files hold identical D at every shape, fp16 and
// bf16, so rpr=1 is the same schedule (and llama-fp16-norpr = llama-fp16).
//
// torch._scaled_mm's scales (scale_epilogue): product, fl32(fl32(sa*sb) *
// acc) + C in binary32 and one rounding to the output. cuBLASLt documents
// D = alpha * (scale_a * scale_b) * (A B) + beta * C with the scales as
// binary32 device scalars (CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER). Measured
// per tensor without C on the H200 (scales 0.37 x 1.9 and 3.3 x 0.011, K 64
// .. 2048, ->fp32/bf16/fp16, fast and not: every GEMM bit-exact); a_then_b
// misses ~28% of every ->fp32 GEMM (e.g. 2930 of 4096), so it is ruled out;
// fused is the same arithmetic when C is absent. With a bias (C, torch's
// `bias=`, ->bf16/fp16 only: torch refuses it with ->fp32) the scaled sum is
// rounded to binary32 before C joins: H100 capture (torch 2.11, set "bias",
// 64x64x128 ->fp16, 0.37 x 1.9) product then + C 4096/4096,
// fused (one rounding for the scale and C) and a_then_b 4095.
//
// Per-row scales (scales=row; scale_a M x 1, scale_b 1 x N) take another
// path with another epilogue, b_then_a: fl32(sa * fl32(sb * acc)), B's
// column scale first. H100 capture (set "rowwise", 64x64x256 and
// 128x96x1024, ->fp32 and ->bf16, fast and not: every GEMM bit-exact);
// ->fp32 rules out product (2661 / 2720 of 4096, 8118 / 8032 of 12288) and
// a_then_b (2721 / 2691, 8069 / 7969); ->bf16 too, by single elements
// (product 12287 of 12288 at 128x96x1024, a_then_b 4095 of 4096 at
// 64x64x256); with a bias ("bias-rowwise", 64x64x512 ->bf16) b_then_a then
// + C 4096/4096, fused and a_then_b 4095. So these calls did not run
// PyTorch's CUTLASS rowwise kernel (f8f8bf16_rowwise, RowwiseScaledMM.cuh:
// A's row scale first, bf16 output only); a column-major library called
// with the operands swapped, as PyTorch calls cuBLASLt, would apply torch's
// scale_b first (our reading, not verified). The accumulation is the
// per-tensor path's (promotion every 4, or one chain with fast_accum=1). The
// H200 rowwise calls (->bf16 only) fit every order.
// The schedule the H100 measurements guess: the instruction and formats
// above, the slices of the measured grid (cublas_h100_guess.cpp).
KernelSchedule h100_guess(const KernelPreset& p, long m, long n, long k) {
  const Format& in = p.input;
  const Format& out = p.output;
  const Kind kind = kind_of(in);
  if (p.input_b && (kind != Kind::fp8 || kind_of(*p.input_b) != Kind::fp8))
    throw std::invalid_argument(
        fmt::format("mixes '{}' with '{}' (only e4m3 x e5m2 FP8 pairs)", in.name, p.input_b->name));
  if (p.fast_accum && kind != Kind::fp8)
    throw std::invalid_argument(fmt::format("takes fast_accum=1 with FP8 inputs only, not '{}'", in.name));
  if (!(out == formats::binary16() || out == formats::bfloat16() || out == formats::binary32()))
    throw std::invalid_argument(fmt::format("outputs fp16, bf16 or fp32, not '{}'", out.name));
  KernelSchedule s;
  s.gpu = "h100";
  s.instruction_kind = kind == Kind::fp8 ? tc_wgmma : tc_mma_sync;
  s.instruction = tensor_core_preset("h100", in, formats::binary32(), s.instruction_kind,
                                     p.input_b.value_or(in), nullptr, 0);
  s.stored = kind == Kind::tf32 ? formats::binary32() : in;
  s.input_rounding = RoundingMode::nearest_even;
  const auto [split_k, split_tile] =
      kind == Kind::fp8 ? std::pair{1, 64} : cublas_detail::h100_grid_split(kind, m, n, k);
  s.split_k = split_k;
  s.split_tile = split_tile;
  s.promotion = kind == Kind::fp8 && !p.fast_accum ? 4 : 0;
  s.scale_epilogue = p.row_scales ? ScaleEpilogue::b_then_a : ScaleEpilogue::product;
  s.output = out;
  s.output_rounding = RoundingMode::nearest_even;
  s.validate();
  return s;
}

// The H100's cuBLASLt heuristic table's answer at this shape, when there is
// a table, it holds the kind and the kernel it names has a schedule.
std::optional<RecordedSchedule> h100_table(const KernelPreset& p, const KernelSchedule& guess, long m, long n,
                                           long k) {
  const CublasTable* t = cublas_table("h100");
  if (!t) return std::nullopt;
  const auto rec = t->lookup(table_kind(p), m, n, k);
  if (!rec) return std::nullopt;
  return schedule_from_record(guess, k, *rec, m, n);
}

KernelSchedule cublas_h100(const KernelPreset& p, long m, long n, long k) {
  KernelSchedule s = h100_guess(p, m, n, k);
  const auto table = h100_table(p, s, m, n, k);
  return table && table->schedule ? *table->schedule : s;
}

std::string cublas_h100_source(const KernelPreset& p, long m, long n, long k) {
  const auto table = h100_table(p, h100_guess(p, m, n, k), m, n, k);
  const std::string guess =
      "the nearest H100-measured shape (grid of 693 shapes a kind, 800 random ones, 40 tf32 rows)";
  if (!table) {
    const CublasTable* t = cublas_table("h100");
    return t ? fmt::format("guess: {} ({} holds no kind {})", guess, t->file.string(), table_kind(p))
             : fmt::format("guess: {} (no heuristic table {})", guess, cublas_table_path("h100").string());
  }
  const std::string file = cublas_table("h100")->file.string();
  if (!table->schedule)
    return fmt::format("guess: {} (the table {} names {}: {})", guess, file, table->family, table->why);
  return fmt::format("cuBLASLt heuristic table {}: {}", file, table->family);
}

}  // namespace

const std::vector<KernelPresetRow>& kernel_presets() {
  static const std::vector<KernelPresetRow> rows{
      {"cublas:h100",
       "cuBLAS (CUDA 13.0) GEMMs on the H100 as torch.matmul / torch._scaled_mm call them: inputs fp16 bf16 "
       "tf32 e4m3 e5m2 (mixed e4m3 x e5m2 by input_b=), outputs fp16 bf16 fp32; split-K and FP8 promotion "
       "(none with fast_accum=1) fitted to shared/cublas-h100, an H100 shape grid, 800 random H100 shapes "
       "and H200 captures; scales=row: the per-row-scaled _scaled_mm epilogue; the slices from the cuBLASLt "
       "heuristic table sim/accumulation/tables/cublas-h100.txt where it exists",
       cublas_h100, cublas_h100_source, h100_guess},
  };
  return rows;
}

std::string kernel_preset_names() {
  std::vector<std::string> names;
  for (const auto& r : kernel_presets()) names.emplace_back(r.name);
  return fmt::format("{}", fmt::join(names, " "));
}

KernelPreset kernel_preset(std::string_view name, const Format& in, const Format& out, int rpr,
                           const Format* input_b, bool fast_accum, bool row_scales) {
  for (const auto& r : kernel_presets()) {
    if (name != r.name) continue;
    if (rpr != 0 && rpr != 1) throw std::invalid_argument(fmt::format("rpr={} is not 0 or 1", rpr));
    KernelPreset p{r.name, in, out, rpr, in, std::nullopt, false};
    if (input_b && *input_b != in) p.input_b = *input_b;
    p.fast_accum = fast_accum;
    p.row_scales = row_scales;
    p.row = &r;
    try {
      p.stored = p.for_shape(64, 64, 256).stored;  // and rejects formats the row does not take
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("kernel preset '{}' {}", name, e.what()));
    }
    return p;
  }
  throw std::invalid_argument(
      fmt::format("unknown kernel preset '{}' (known: {})", name, kernel_preset_names()));
}

namespace {

const KernelPresetRow& row_of(const KernelPreset& p) {
  if (p.row) return *p.row;
  for (const auto& r : kernel_presets())
    if (p.name == r.name) return r;
  throw std::invalid_argument(
      fmt::format("unknown kernel preset '{}' (known: {})", p.name, kernel_preset_names()));
}

bool same_preset(const KernelPreset& x, const KernelPreset& y) {
  return x.name == y.name && x.input == y.input && x.output == y.output && x.rpr == y.rpr &&
         x.input_b == y.input_b && x.fast_accum == y.fast_accum && x.row_scales == y.row_scales;
}

}  // namespace

KernelSchedule KernelPreset::for_shape(long m, long n, long k) const {
  // The last shapes asked on this thread (issue #38: a dot product under a
  // preset searched the measured shapes at every call; rpsim.gemm asks for
  // two shapes a call, kernel_preset()'s check and the GEMM's own).
  struct Memo {
    std::optional<KernelPreset> preset;
    long m = 0, n = 0, k = 0;
    KernelSchedule schedule;
  };
  constexpr std::size_t kKept = 4;
  thread_local std::array<Memo, kKept> memo;
  thread_local std::size_t next = 0;
  for (const Memo& e : memo)
    if (e.preset && e.m == m && e.n == n && e.k == k && same_preset(*e.preset, *this)) return e.schedule;
  KernelSchedule s = row_of(*this).schedule(*this, m, n, k);
  memo[next] = {*this, m, n, k, s};
  next = (next + 1) % kKept;
  return s;
}

KernelSchedule KernelPreset::base_for_shape(long m, long n, long k) const {
  const KernelPresetRow& r = row_of(*this);
  return r.base ? r.base(*this, m, n, k) : for_shape(m, n, k);
}

std::string KernelPreset::source(long m, long n, long k) const {
  return row_of(*this).source(*this, m, n, k);
}

}  // namespace rpsim::sim
