// Which kernel schedule reproduces a dumped GEMM? A black-box probe of an
// unknown kernel (`rpsim gemm-check FILE --infer`): a search over the
// schedule space of kernel_schedule.hpp, screened on samples of the output
// elements before whole-matrix checks (a candidate missing a sampled element
// cannot reproduce the dump; every reported count is the whole dump's).
//
// The space: the instruction (every GPU preset that takes the input format,
// mma.sync and wgmma, binary32 accumulator, binary16 too for binary16
// output), the input conversion (tf32 from binary32: rne rna rtz), how K is
// cut into chunks (split-K S = 1..64 over k-tiles of 16..256, promotion
// every 1..8 instructions; schedules giving the same chunks are one
// candidate), the k-block order, the split-K reduction (order, binary32 or
// output format, rne or rtz), the promotion adds' rounding and the output
// conversion (rne or rtz).
//
// Beside the kernel schedules, every plain accumulation model (what a CPU
// BLAS, a reference loop or a non-Tensor-Core kernel computes): exact,
// sequential, fma, pairwise, blocked (B = 8..256) and Kahan, in the output
// format and in binary32, K in increasing and in decreasing order; binary32
// inputs both as they are and converted to tf32 first (rne, rna, rtz), the
// sum rounded to the output format where it is narrower. Candidates are
// ranked by bit-exact elements, then by max and mean ulps.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/validation/gemm_check.hpp"

namespace rpsim::sim {

struct InferOptions {
  std::size_t sample = 64;     // elements screened first
  std::size_t confirm = 1024;  // elements checked before the whole matrix
  std::size_t top = 5;         // schedules reported when none reproduces the dump
  std::size_t max_exact = 20;  // reproducing schedules reported at most
  int threads = 1;
  // When a schedule reproduces the dump, stage 2 only asks the candidates
  // whether they reproduce the confirm sample (the same report, faster);
  // false: every stage counts every candidate (the reference tests compare with).
  bool exact_first = true;
};

struct InferredSchedule {
  std::string spec;                      // kernel:... or a plain model (AccumulationModel spec)
  std::vector<std::string> equivalents;  // other fields giving the same chunks (split_k=8:split_tile=32 ...)
  std::size_t passed = 0, total = 0;     // on the whole dump
  double max_ulps = 0, mean_ulps = 0;    // on the whole dump, output format
  // A plain model's conditions: "K in decreasing order", "inputs rounded to
  // tf32 (rne)", "the binary32 sum rounded to binary16 (rne)"; "" for none.
  std::string note;
  // The kernel family (schedule_family: "split-K 3 x 64-k tiles, binary32
  // workspace", "CUDA-core gemmSN ..."), or "plain accumulation model".
  std::string family;
};

// Ranking: more bit-exact elements first, then the smaller max ulps, then
// the smaller mean ulps.
bool ranks_before(const InferredSchedule& x, const InferredSchedule& y);

struct InferResult {
  Format stored, input, output;         // what the values say
  std::size_t candidates = 0;           // schedules screened
  std::vector<InferredSchedule> exact;  // every element bit-exact
  std::vector<InferredSchedule> best;   // when `exact` is empty: the best found (else empty)
  std::vector<std::string> presets;     // named presets (cublas:h100:...) that reproduce the dump
  bool truncated = false;               // more reproducing schedules than max_exact
};

// Throws GemmDumpError when A, B or D hold values of no format the search
// knows (A and B: e4m3 e5m2 fp16 bf16 tf32 or binary32; D: fp16 bf16 fp32).
InferResult infer_schedule(const GemmDump& dump, const InferOptions& options = {});

}  // namespace rpsim::sim
