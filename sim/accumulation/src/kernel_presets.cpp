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
#include <cmath>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "cublas_h100_grid.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/accumulation/tensor_core_operands.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"

namespace rpsim::sim {

namespace {

enum class Kind { fp16, bf16, tf32, fp8 };

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

// tf32: the split-K slices cuBLAS's heuristic chose, found per shape by
// `rpsim gemm-check --infer`-style search (split_k x split_tile reproducing
// all of D). No closed rule fits them: the slice count is not monotone in K
// (128x128: 2 slices at K=64, one at 128, 4 at 256), saturates at 22 at
// 128x128 (K 2048 and 4096) but not at 64x64 (32 at K=2048), and drops to 8
// at 256x256; K not a multiple of 32 (344) uses 8-k granules (64x64x344: 22
// slices of 16; 128x128, 256x128, 128x256: 5 of 72; 256x256: 4 of 88). So
// the measured shapes are a table. Sources: shared/cublas-h100 (H100:
// 64x64x256, 256x128x1024, 128x128x4096; the neighbours: S = 4 (4 x 64) 894
// of 4096; 8 x 128 3780 and S = 11 5972 of 32768; S = 16 1048, S = 19 1393
// of 16384) and the H200 captures (tf32-grid: 37 shapes; the real GPT,
// LLaMA-style and ResNet steps). These rows win over the H100 grid where
// both hold a shape (one conflict: 384x128x256, 4 slices on the H200, one
// chain in the grid). An addmm (C = bias, nn.Linear) picks its own kernel:
// on the H100 grid's F.linear cases (M 64..4096, N 64..4096, K 256..8192)
// the bias joins as cuBLAS's epilogue C (beta = 1: added to the reduced
// binary32 result, one rounding; as the chain's start value 0 of 40 sampled
// cases fit) and its own kernel's slices reproduce 243 of 252 (9 cutlass
// split-K cases with 8+ output tiles fit no slicing tried), but its slices
// differ from mm's (z = 7 at K = 1024, 10 at 8192), so mm's table gets 108 of
// 252; the preset does not see beta (gpt-tf32's 2 addmm misses).
struct SplitRow {
  long m, n, k;
  int split_k, split_tile;
};
constexpr SplitRow kTf32Splits[] = {
    {64, 64, 64, 2, 32},      {64, 64, 128, 4, 32},     {64, 64, 256, 8, 32},     {64, 64, 344, 22, 8},
    {64, 64, 512, 8, 32},     {64, 64, 1024, 16, 32},   {64, 64, 2048, 32, 32},   {128, 128, 64, 2, 32},
    {128, 128, 128, 1, 32},   {128, 128, 256, 4, 32},   {128, 128, 344, 5, 8},    {128, 128, 512, 8, 32},
    {128, 128, 1024, 16, 32}, {128, 128, 2048, 22, 32}, {128, 128, 4096, 22, 32}, {256, 128, 64, 2, 32},
    {256, 128, 128, 1, 32},   {256, 128, 256, 4, 32},   {256, 128, 344, 5, 8},    {256, 128, 384, 6, 32},
    {256, 128, 512, 8, 32},   {256, 128, 1024, 16, 32}, {128, 256, 64, 2, 32},    {128, 256, 128, 1, 32},
    {128, 256, 256, 4, 32},   {128, 256, 344, 5, 8},    {128, 256, 512, 8, 32},   {128, 256, 1024, 16, 32},
    {256, 256, 64, 1, 32},    {256, 256, 128, 1, 32},   {256, 256, 256, 1, 32},   {256, 256, 344, 4, 8},
    {256, 256, 512, 8, 32},   {256, 256, 1024, 8, 32},  {384, 128, 256, 4, 32},   {344, 128, 256, 4, 32},
    {128, 344, 256, 4, 32},   {256, 344, 128, 1, 32},   {32, 64, 64, 1, 32},      {64, 32, 64, 1, 32},
};

// How the slices add up (fp16/bf16, shared/cublas-h100 128x128x4096, 3
// slices of 1408, 1408, 1280 = ceil(64/3) = 22 k-tiles of 64, the short slice
// last): partials added in slice order by binary32 RNE adds (fp16->fp32
// 16384/16384; no split-K 76; split 2 312, 4 475; 32-k tiles 1290; short
// slice first 763 or in the middle 1177; reduction reversed 11079, exact then
// one rounding 12667, RTZ adds 9440). The old rule "3 slices once K >= 4096"
// missed the H200's held-out 96x64x3072 (2 slices): the grid has it.
// The split-K slices of an M x N x K GEMM, from the H100 shape grid
// (cublas_h100_grid.hpp, generated by sim/accumulation/fit/cublas_h100_grid.py
// from the kernels each GEMM launched, checked against D) and, for tf32, the
// 40 rows above. What cuBLAS 13 launches (693 shapes per kind, M 64..4096,
// N 64..4096, K 256..12288): fp16/bf16 nvjet kernels, one chain unless the
// kernel is a splitK one (64-k tiles; 173 of 693 shapes: 2 slices from K =
// 3072 at small outputs up to 9 at K = 12288, fewer as the output tiles fill
// the 132 SMs; fp16 and bf16 differ at 2 shapes); tf32 cutlass_80 split-K
// kernels (grid.z slices of the kernel's k-tile, 16 or 32, up to 64) at small
// outputs and sm90_xmma kernels (one chain) at large ones; sm90_xmma
// segment-K kernels (stream-K style, 47 tf32 shapes with K >= 1536 and large
// outputs) cut each output tile's K differently, which a schedule cannot
// say: 14 happen to fit one slicing, 33 are '?'. Grid GEMMs bit-exact (all
// three stored blocks), old rule -> this table: tf32 182 -> 659 of 693 (the
// 33 '?' and the 384x128x256 conflict), fp16->fp32 450 -> 693, fp16->fp16
// 463/465 -> 693, bf16 595/603 -> 693, FP8 693 (unchanged). A second capture
// (same session, 800 random shapes: M, N 32..2048, K 256..16384) is searched
// too (kOff*: fp16 all 799 shapes, bf16 798, tf32 752; 47 segment-K ?). Off the
// measured shapes: the slices of the one nearest in |dlog2 M| + |dlog2 N| +
// w |dlog2 K| (w = 2 fp16/bf16, 1 tf32, best when each grid shape is left
// out; w = 1 gives fp16 561 of 693), for fp16/bf16 moved along K by the
// k-tile rule below; no closed rule for the output's cap (it follows the
// kernel's tile and cluster, not M*N). The rand GEMMs bit-exact before they
// were added, grid nearest-shape -> + K rule: fp16->fp32 640 -> 675 of 800,
// fp16->fp16 652 -> 679, bf16 733 -> 745, tf32 307 (unchanged); slice sets
// right guessing rand from the grid: fp16 639 -> 674 of 799, tf32 295 of 752;
// leave-one-out on grid + rand: fp16 1295 of 1492 (nearest alone 1265), bf16
// 1292 of 1491, tf32 796 of 1412. On the held-out H200 capture (not used to fit)
// fp16/bf16 96x64x3072 passes; its small tf32 shapes (K 48..1536) mostly
// stay guesses.
int grid_digit(char c) {
  static constexpr std::string_view digits =
      "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+*@";
  const auto i = digits.find(c);
  return i == std::string_view::npos ? 0 : static_cast<int>(i);
}

// The most slices nvjet splitK cuts K into: each keeps more than 20 k-tiles
// of 64. No fp16/bf16 count measured on the H100 (grid and rand, 1492
// shapes) exceeds it; 991 equal it, the rest are capped by their output
// tiles filling the 132 SMs (no closed form found: it follows the kernel's
// tile and cluster) or are one chain (no splitK kernel).
long k_rule_split(long k) {
  return std::max(1L, ((k + 63) / 64 + 19) / 20 - 1);
}

std::pair<int, int> grid_split(Kind kind, long m, long n, long k) {
  namespace g = cublas_h100_grid;
  const auto& strings = kind == Kind::fp16 ? g::kFp16 : kind == Kind::bf16 ? g::kBf16 : g::kTf32;
  const char* off = kind == Kind::fp16 ? g::kOffFp16 : kind == Kind::bf16 ? g::kOffBf16 : g::kOffTf32;
  const double wk = kind == Kind::tf32 ? 1.0 : 2.0;
  const auto lg = [](long v) { return std::log2(double(std::max(v, 1L))); };
  const auto dist = [&](long m2, long n2, long k2) {
    return std::fabs(lg(m2) - lg(m)) + std::fabs(lg(n2) - lg(n)) + wk * std::fabs(lg(k2) - lg(k));
  };
  std::pair<int, int> best{1, kind == Kind::tf32 ? 32 : 64};
  double best_d = INFINITY;
  long best_k = k;
  const auto take = [&](int s, double d, long k2, char tile) {
    if (s == 0 || d >= best_d) return;
    best_d = d, best_k = k2;
    best = {s, kind != Kind::tf32 ? 64 : tile == 's' ? 16 : 32};
  };
  for (std::size_t i = 0; i < std::size(g::kM); ++i)
    for (std::size_t j = 0; j < std::size(g::kN); ++j)
      for (std::size_t l = 0; l < std::size(g::kK); ++l)
        take(grid_digit(strings[i][j][l]), dist(g::kM[i], g::kN[j], g::kK[l]), g::kK[l],
             g::kTf32Tile[i][j][l]);
  for (std::size_t i = 0; i < std::size(g::kOffM); ++i)
    take(grid_digit(off[i]), dist(g::kOffM[i], g::kOffN[i], g::kOffK[i]), g::kOffK[i], g::kOffTf32Tile[i]);
  // fp16/bf16 off the measured shapes: the neighbour's count moved along K by
  // the rule above (at its K's rule count -> this K's; capped below it -> kept,
  // at most this K's). Guessing the rand shapes from the grid: 674 of 799 fp16
  // slice sets right (nearest shape alone 639); leave-one-out on grid + rand
  // 1297 of 1492 (1265).
  if (kind != Kind::tf32 && best_d > 0) {
    const long s =
        best.first == k_rule_split(best_k) ? k_rule_split(k) : std::min<long>(best.first, k_rule_split(k));
    best.first = static_cast<int>(s);
  }
  if (kind == Kind::tf32) {  // the older measured rows (shapes off the grid: K 64..344, H200)
    for (const auto& r : kTf32Splits) {
      if (r.m == m && r.n == n && r.k == k) return {r.split_k, r.split_tile};
      if (dist(r.m, r.n, r.k) < best_d) best_d = dist(r.m, r.n, r.k), best = {r.split_k, r.split_tile};
    }
    // K off the k-tile: tf32 cuts 8-k granules (64x64x344: 22 slices of 16).
    if (k % 32 != 0)
      best.second = 8;
    else if (best.second == 8)
      best.second = 32;
  }
  const long tiles = (k + best.second - 1) / best.second;
  best.first = static_cast<int>(std::clamp<long>(best.first, 1, std::max(tiles, 1L)));
  return best;
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
KernelSchedule cublas_h100(const KernelPreset& p, long m, long n, long k) {
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
  const auto [split_k, split_tile] = kind == Kind::fp8 ? std::pair{1, 64} : grid_split(kind, m, n, k);
  s.split_k = split_k;
  s.split_tile = split_tile;
  s.promotion = kind == Kind::fp8 && !p.fast_accum ? 4 : 0;
  s.scale_epilogue = p.row_scales ? ScaleEpilogue::b_then_a : ScaleEpilogue::product;
  s.output = out;
  s.output_rounding = RoundingMode::nearest_even;
  s.validate();
  return s;
}

}  // namespace

const std::vector<KernelPresetRow>& kernel_presets() {
  static const std::vector<KernelPresetRow> rows{
      {"cublas:h100",
       "cuBLAS (CUDA 13.0) GEMMs on the H100 as torch.matmul / torch._scaled_mm call them: inputs fp16 bf16 "
       "tf32 e4m3 e5m2 (mixed e4m3 x e5m2 by input_b=), outputs fp16 bf16 fp32; split-K and FP8 promotion "
       "(none with fast_accum=1) fitted to shared/cublas-h100, an H100 shape grid, 800 random H100 shapes "
       "and H200 captures; scales=row: the per-row-scaled _scaled_mm epilogue",
       cublas_h100},
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

KernelSchedule KernelPreset::for_shape(long m, long n, long k) const {
  for (const auto& r : kernel_presets())
    if (name == r.name) return r.schedule(*this, m, n, k);
  throw std::invalid_argument(
      fmt::format("unknown kernel preset '{}' (known: {})", name, kernel_preset_names()));
}

}  // namespace rpsim::sim
