// The kernel-schedule layer: how a GEMM kernel drives a Tensor Core
// instruction (tensor_core.hpp) over K. CUTLASS's lesson: the MMA instruction
// and the kernel schedule above it are separate layers with separate presets,
// so a cuBLAS GEMM is a schedule over an instruction preset, never a special
// case inside the instruction model.
//
// What a schedule does to one output element d(i, j):
//   1. A and B come in the `stored` format and are converted to the
//      instruction's input format with `input_rounding` (tf32 from binary32:
//      rne, rna or rtz; identity when they are values of it already);
//   2. K is cut into `split_k` slices (split-K): each slice is
//      ceil(ceil(K / split_tile) / split_k) tiles of split_tile k, from k = 0,
//      the last one shorter (cuBLAS's rule, /work/scratch/cublas/REPORT.md;
//      the same as CUTLASS's gemm_k_size = round_up(ceil(K / S), split_tile));
//      with `residue_tile` R > 0 (CUTLASS kernels on a K that is not a whole
//      number of their k-tiles), a slice of L products first runs L % R of
//      them as a partial tile cut into instructions from its start, then the
//      rest: the short instruction sits at index floor((L % R) / terms) of the
//      first tile, not at the slice's end;
//   3. each slice is cut into chunks of `promotion` instructions (0: one
//      chunk); a chunk is a chain of instructions (tensor_core_dot's chain)
//      over its k-blocks in `k_order`, starting from zero; the chunk results
//      are added into a binary32 accumulator in order, each add rounded with
//      `promotion_rounding` (FP8 two-level accumulation: CUTLASS's
//      mma_promotion_interval, cuBLAS without fast accumulation);
//   4. the slices' partial results are merged as `merge` says (cuBLASLt's
//      REDUCTION_SCHEME): `workspace` converts them to `reduction_format` and
//      reduces them in `reduction` order, each add rounded to that format with
//      `reduction_rounding`, the sum starting at partial 0 (not at a zero,
//      which would turn a -0 partial into +0); `output_partials` rounds each
//      partial to the output format first (an output-typed workspace), then
//      the same sum; `serial` keeps the running total in the output format
//      between slices (CUTLASS GemmSplitKSerial: each slice adds its binary32
//      partial to the previous slices' D, rounds to the output, with C joining
//      at slice 0);
//   5. C: with c_placement = epilogue (cuBLAS's beta*C) added to the reduced
//      result in the reduction format (a C of +0 is no C: beta = 0); with
//      accumulator, the starting value of the first chunk of slice 0;
//   6. the result is rounded to `output` with `output_rounding`.
// torch._scaled_mm's scale_a / scale_b (one per tensor, or per row of A /
// column of B; gemm.hpp GemmScales) act between steps 4 and 5, in binary32,
// as `scale_epilogue` says: `product` fl32(fl32(sa*sb) * acc) (cuBLASLt's
// D = alpha*(scale_a*scale_b)*AB + beta*C with the two scales folded into
// one alpha), `a_then_b` fl32(sb * fl32(sa * acc)) (a CUTLASS epilogue
// visitor tree applying one scale after the other, PyTorch's rowwise FP8
// kernel), `b_then_a` fl32(sa * fl32(sb * acc)) (the other order: what
// torch._scaled_mm with per-row scales computes on the H100, B's column
// scale first; kernel_presets.cpp), `fused` fl32(fma(fl32(sa*sb), acc, C)) (CUTLASS's
// LinearCombination multiply_add: one rounding for the scale and C). C then
// joins in binary32 and step 6 rounds once to the output.
// A split-K slice with promotion and a promotion chunk are the same
// arithmetic under a sequential binary32 reduction: only the chunk
// boundaries matter (REPORT.md, sec. 1).
//
// Named presets choose a schedule from the GEMM's shape (kernel_presets()):
// `cublas:h100:IN:OUT[:rpr=0|1][:input_b=FMT][:fast_accum=0|1][:scales=tensor|row]`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim {

enum class KOrder : std::uint8_t { increasing, decreasing };
enum class Reduction : std::uint8_t { sequential, reverse, pairwise, exact };
enum class CPlacement : std::uint8_t { epilogue, accumulator };
enum class ScaleEpilogue : std::uint8_t { product, a_then_b, fused, b_then_a };
// How split-K partials are merged: cuBLASLt's CUBLASLT_REDUCTION_SCHEME
// COMPUTE_TYPE (a binary32 workspace, splitKreduce), OUTPUT_TYPE (partials
// stored in the output type first) and NONE (GemmSplitKSerial: the slices
// take turns on D). bitequiv (facebookexperimental/triton, bitequiv/
// cublas_equiv_gemm.py) measured all three on non-aligned split-K shapes
// (12% / 17% / 70%) and reads the scheme off REDUCTION_SCHEME.
enum class SplitKMerge : std::uint8_t { workspace, output_partials, serial };
// cuBLAS's CUDA-core (SIMT) kernels for thin shapes: one binary32 FMA chain
// per thread, no Tensor Core (kernel_simt.cpp has each order and where it
// comes from). none: the Tensor Core chain of `instruction`.
//   gemmsn       gemmSN / magma_sgemmEx: simt_threads threads per output, each
//                a contiguous ceil(L / threads) of the slice, in sub-blocks of
//                simt_sub (0: one) each chained from zero, the sub-block sums
//                added into the thread's sum, the threads' sums added in order;
//   gemv         gemv2T / gemv2N: simt_threads lanes, lane l taking the
//                simt_vector products at l * V of every tile of V * lanes,
//                simt_sub tiles a chunk (each chained from zero, the chunks
//                added in order), the lanes combined in order or by a
//                count-down butterfly (simt_combine);
//   gemv_slices  gemv2N with contiguous lanes: lane l the ceil(L / lanes)
//                products from l * ceil(L / lanes), in chunks of simt_sub;
//   dot          dot_kernel + reduce_1Block: split_k blocks own the tiles of
//                V * 128 products in turn (strided), each of 128 threads V
//                chains; the 128 threads by a count-down butterfly; the
//                blocks' partials by reduce_1Block<128>.
enum class SimtOrder : std::uint8_t { none, gemmsn, gemv, gemv_slices, dot };
enum class LaneCombine : std::uint8_t { sequential, butterfly };

// A consecutive range of K accumulated as one chain from zero; `slice` is its
// split-K slice; `lead` > 0: its first `lead` products are a partial tile
// whose instructions are cut from `begin`, the rest's from begin + lead
// (residue_tile).
struct KChunk {
  int begin = 0, end = 0, slice = 0, lead = 0;
  bool operator==(const KChunk&) const = default;
};

struct KernelSchedule {
  // The instruction: a Tensor Core preset (gpu, input, accumulator format,
  // instruction kind) with any field overridden; the preset's name parts are
  // kept so that spec() can say which preset and which overrides.
  std::string gpu = "h100";
  TensorCoreInstruction instruction_kind = tc_mma_sync;
  TensorCoreModel instruction;
  Format stored;  // the format A and B come in
  RoundingMode input_rounding = RoundingMode::nearest_even;
  int split_k = 1;
  int split_tile = 64;
  int residue_tile = 0;  // k-tile whose residue leads each slice (CUTLASS); 0: none
  int promotion = 0;     // instructions per promoted chunk; 0: none
  RoundingMode promotion_rounding = RoundingMode::nearest_even;
  KOrder k_order = KOrder::increasing;
  Reduction reduction = Reduction::sequential;
  SplitKMerge merge = SplitKMerge::workspace;
  Format reduction_format = formats::binary32();
  RoundingMode reduction_rounding = RoundingMode::nearest_even;
  CPlacement c_placement = CPlacement::epilogue;
  ScaleEpilogue scale_epilogue = ScaleEpilogue::product;  // how _scaled_mm's scales are applied
  SimtOrder simt = SimtOrder::none;  // a CUDA-core kernel's order instead of the instruction's chain
  int simt_threads = 1, simt_sub = 0, simt_vector = 1;
  LaneCombine simt_combine = LaneCombine::sequential;
  Format output = formats::binary32();
  RoundingMode output_rounding = RoundingMode::nearest_even;

  // Throws std::invalid_argument naming the field.
  void validate() const;
  // The chunks of a K-long dot product, in the order they are accumulated.
  std::vector<KChunk> chunks(int k) const;
  // The schedule of a bare instruction chain: one chunk, C as its start, the
  // instruction's output format (what `tc:` models compute).
  static KernelSchedule of_instruction(const TensorCoreModel& m);
  // True when the schedule is one plain instruction chain (of_instruction).
  bool is_plain_chain() const;
};

// Steps 4 to 6 on given slice partials (values of binary32, slice 0 first):
// the merge, C in the epilogue (+0: none), the output conversion; what a
// GEMM under `s` does with its slices' results.
double merge_partials(const KernelSchedule& s, std::vector<double> partials, double c = 0);

// The kernel family a schedule describes for a K-long dot product, in words
// ("one Tensor Core chain", "split-K 3 x 64-k tiles, binary32 workspace",
// "CUDA-core gemmSN (4 threads, sub-blocks of 128)", ...): what --infer and
// gemm-check name.
std::string schedule_family(const KernelSchedule& s, int k);

struct KernelPresetRow;

// A named preset: a rule choosing the schedule from the GEMM's shape, for
// one input and output format (`cublas:h100:IN:OUT[:rpr=R]`).
struct KernelPreset {
  std::string name;  // the table row, e.g. "cublas:h100"
  Format input, output;
  int rpr = 0;    // PyTorch's allow_{fp16,bf16}_reduced_precision_reduction
  Format stored;  // the format A and B come in (binary32 for tf32)
  // B's format when it differs from A's (torch._scaled_mm's e4m3 x e5m2).
  std::optional<Format> input_b;
  // torch._scaled_mm(..., use_fast_accum=True): FP8 without promotion.
  bool fast_accum = false;
  // torch._scaled_mm with per-row scale_a (M x 1) and per-column scale_b
  // (1 x N): the epilogue of that path (scales=row). gemm() sets it itself
  // when it is given such scales.
  bool row_scales = false;
  // Its table row, found once by kernel_preset() (issue #38: for_shape
  // searched the table by name at every call); null: looked up by name.
  const KernelPresetRow* row = nullptr;
  // The schedule for an M x N x K GEMM (a dot product is 1 x 1 x K). The last
  // four shapes' schedules are kept per thread, so a loop of dot products or
  // GEMMs of one shape picks it once.
  KernelSchedule for_shape(long m, long n, long k) const;
  // Where that schedule's slices come from: "cuBLASLt heuristic table FILE
  // (...)" or "guess: ..." (no table for the GPU, or the table's kernel is
  // one no schedule models).
  std::string source(long m, long n, long k) const;
  // The schedule before any heuristic table: what a recorded cuBLAS call is
  // read over (schedule_from_record keeps its instruction and formats; a
  // table entry's kernel rule must not leak into another record's).
  KernelSchedule base_for_shape(long m, long n, long k) const;
};

// One row of the kernel-preset table.
struct KernelPresetRow {
  const char* name;  // "cublas:h100"
  const char* description;
  // Builds the schedule; throws std::invalid_argument for formats the row
  // does not take.
  KernelSchedule (*schedule)(const KernelPreset& p, long m, long n, long k);
  std::string (*source)(const KernelPreset& p, long m, long n, long k);
  // The schedule without the row's heuristic table (null: `schedule`).
  KernelSchedule (*base)(const KernelPreset& p, long m, long n, long k) = nullptr;
};
const std::vector<KernelPresetRow>& kernel_presets();
// "cublas:h100 ..." for error messages and help.
std::string kernel_preset_names();
// The preset `name` ("cublas:h100") for these formats; throws
// std::invalid_argument listing the table's names or the formats it takes.
// input_b: B's format if not `in`; fast_accum: _scaled_mm's use_fast_accum;
// row_scales: its per-row scales.
KernelPreset kernel_preset(std::string_view name, const Format& in, const Format& out, int rpr,
                           const Format* input_b = nullptr, bool fast_accum = false, bool row_scales = false);

// A KernelSchedule field a spec string or JSON may set (`split_k=3`), one row
// each; the instruction's own fields (terms_per_step, ...) are the Tensor
// Core model's table.
struct ScheduleField {
  const char* name;
  const char* help;
  std::string (*get)(const KernelSchedule&);
  void (*set)(KernelSchedule&, const std::string&);  // throws std::invalid_argument
};
const std::vector<ScheduleField>& schedule_fields();
const ScheduleField* find_schedule_field(std::string_view name);

}  // namespace rpsim::sim
