// A recorded cuBLAS call read into a kernel schedule (cublas_record.hpp).
//
// One rule per kernel family, each with where it comes from:
//  - nvjet (cuBLAS's own Hopper kernels): one Tensor Core chain, or with
//    "splitK" in the name SPLITK_NUM slices of the name's k-tile (its second
//    MxN field: nvjet_sm90_hss_64x32_64x16_... slices of 64): the H100 grid
//    (693 shapes a kind, fp16 and bf16, sim/accumulation/fit) and bitequiv
//    (grain 64 for fp16/bf16, 128 for FP8; SPLITK_NUM read from
//    cublasLtMatmulAlgoGetHeuristic: 131,533 FP8 shapes, no counterexample);
//  - cutlass_80_* (mma.sync kernels, K or N not 8-aligned and tf32): the MMA
//    in the name gives the products per instruction (s1688: 8, s16816 and
//    s161616: 16), the tile's k its residue tile (bitequiv: the partial MMA
//    at floor(RES / KPD) of the first tile, 1,806 non-aligned fp16 shapes);
//    (cutlass_75_* names give none: 32, CUTLASS's SM75 default, fitted on
//    an H200 capture); grid.z (else SPLITK_NUM) slices of CUTLASS's grain:
//    128 bytes of elements when they divide K, else 16 bytes (kAlignK;
//    gemm_k_size = round_up(ceil(K / S), grain)), merged as what ran;
//  - thin shapes' CUDA-core kernels: see cuda_core();
//  - sm90_xmma without segment-K: one chain (the H100 tf32 grid); with
//    segment-K on: no schedule models it (33 H100 grid shapes fit none);
//  - magma_sgemmEx (ALGO_ID 16): one binary32 FFMA chain (bitequiv);
//    gemmSN, gemv, dot: CUDA-core kernels whose thread counts and lane layouts
//    are not known for this GPU (kernel_simt.cpp): named, not modelled;
//  - the merge: REDUCTION_SCHEME (NONE serial, COMPUTE_TYPE workspace,
//    OUTPUT_TYPE output partials; bitequiv: 119 shapes, no mixing); else a
//    splitKreduce kernel (the H100 grid: binary32 workspace at every fp16,
//    bf16 and tf32 split, fp16 and bf16 outputs included), else none launched
//    (the slices merge inside the GEMM kernel: serial).
#include "rpsim/accumulation/cublas_record.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <regex>
#include <stdexcept>
#include <vector>

namespace rpsim::sim {

namespace {

bool has(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

// The first cutlass_... or nvjet_... token of a (possibly demangled) name:
// a demangled symbol repeats the kernel name.
std::string core_name(const std::string& name) {
  static const std::regex core(R"((cutlass_|nvjet_)[A-Za-z0-9_]+)");
  std::smatch m;
  return std::regex_search(name, m, core) ? m.str(0) : name;
}

// The k of the second MxN field (nvjet's k-tile, cutlass's threadblock k).
int second_tile_k(const std::string& core) {
  static const std::regex tile(R"(_(\d+)x(\d+)(?=_|$))");
  int seen = 0;
  for (auto it = std::sregex_iterator(core.begin(), core.end(), tile); it != std::sregex_iterator(); ++it)
    if (++seen == 2) return std::stoi((*it)[1].str());
  return 0;
}

// Products per MMA of a cutlass_*_s<MMA>gemm name; 0: not one we know.
int mma_k(const std::string& core) {
  static const std::regex mma(R"(_s(\d+)gemm)");
  struct Row {
    const char* shape;
    int k;
  };
  static constexpr Row kMma[] = {{"1688", 8}, {"16816", 16}, {"161616", 16}, {"884", 4}, {"16832", 32}};
  std::smatch m;
  if (!std::regex_search(core, m, mma)) return 0;
  for (const auto& r : kMma)
    if (m[1].str() == r.shape) return r.k;
  return 0;
}

int stored_bytes(const KernelSchedule& s) {
  return std::max(1, s.stored.bits / 8);
}

struct Merge {
  std::optional<SplitKMerge> merge;
  std::string why;
};

Merge merge_of(const CublasRecord& r) {
  if (r.reduction_scheme) switch (*r.reduction_scheme) {
      case cublas_reduction_none: return {SplitKMerge::serial, ""};
      case cublas_reduction_compute_type: return {SplitKMerge::workspace, ""};
      case cublas_reduction_output_type: return {SplitKMerge::output_partials, ""};
      case cublas_reduction_inplace:
        return {std::nullopt, "REDUCTION_SCHEME INPLACE: atomic adds, in no fixed order"};
      default:
        return {std::nullopt,
                fmt::format("REDUCTION_SCHEME {} is not one cuBLASLt documents", *r.reduction_scheme)};
    }
  for (const auto& k : r.kernels)
    if (has(k.name, "splitKreduce")) return {SplitKMerge::workspace, ""};
  return {SplitKMerge::serial, ""};
}

const char* merge_words(SplitKMerge m) {
  constexpr const char* words[] = {"binary32 workspace", "partials in the output format",
                                   "serial in the output format"};
  return words[static_cast<int>(m)];
}

RecordedSchedule not_modelled(std::string family, std::string why) {
  return {std::nullopt, std::move(family), std::move(why)};
}

// Slices and merge over `s` (split_tile set); the family text gains them.
RecordedSchedule sliced(KernelSchedule s, int split, const CublasRecord& r, std::string family) {
  s.split_k = std::max(1, split);
  if (s.split_k > 1) {
    const Merge m = merge_of(r);
    if (!m.merge) return not_modelled(family, m.why);
    s.merge = *m.merge;
    family += fmt::format(", split-K {} x {}-k tiles, {}", s.split_k, s.split_tile, merge_words(s.merge));
  }
  try {
    s.validate();
  } catch (const std::invalid_argument& e) {
    return not_modelled(family, e.what());
  }
  return {s, family, ""};
}

RecordedSchedule nvjet(KernelSchedule s, const std::string& core, const CublasRecord& r) {
  const bool split = has(core, "splitK") || r.splitk_num.value_or(1) > 1;
  const int grain = second_tile_k(core);
  s.split_tile = grain > 0 ? grain : s.stored.bits <= 8 ? 128 : 64;
  if (split && !r.splitk_num)
    return not_modelled("nvjet splitK", "the slice count is cuBLASLt's SPLITK_NUM, which was not recorded");
  return sliced(s, split ? *r.splitk_num : 1, r, "nvjet");
}

RecordedSchedule cutlass(KernelSchedule s, const std::string& core, const CublasRecord& r, long k,
                         const CublasKernel& main) {
  // cutlass_75_* names (cuBLAS's Turing-generation kernels, which the H200 runs at unaligned fp16 and bf16
  // shapes) carry no threadblock k; CUTLASS's SM75 tensor-op default is 32 (default_gemm_configuration.h,
  // GemmShape<128, 256, 32>), and the H200 fit capture agrees: 555 of 555 unsplit non-8-aligned fp16
  // GEMMs bit-exact with a 32-k residue tile, 503 with none, 528 with 64 (seed 41, 2026-11-29).
  const int named_k = second_tile_k(core);
  const int kpd = mma_k(core), block_k = named_k == 0 && core.starts_with("cutlass_75_") ? 32 : named_k;
  if (kpd == 0) return not_modelled("cutlass " + core, "its MMA shape is not one the rules know");
  if (kpd != s.instruction.instruction_terms()) {
    s.instruction.terms_per_step = kpd;
    s.instruction.terms_per_instruction = 0;
  }
  s.residue_tile = block_k;
  const int line = 128 / stored_bytes(s), align = std::max(1, 16 / stored_bytes(s));
  s.split_tile = k % line == 0 ? line : align;
  // What ran, where the capture saw the kernels: grid.z is the slice count, and the merge is a
  // splitKreduce kernel's workspace (or output partials, as REDUCTION_SCHEME says) when one ran, else
  // the slices' turns on D inside the kernel (CUTLASS's serial split-K). The heuristic's answer is the
  // query's, and torch's call can differ: on the H200 fit capture (seed 41) 43 GEMMs ran one slice
  // where SPLITK_NUM said 2..11, 104 serial where REDUCTION_SCHEME said INPLACE (every one bit-exact
  // so, none otherwise).
  CublasRecord ran = r;
  if (main.grid[2] > 0) {
    ran.splitk_num = static_cast<int>(main.grid[2]);
    const bool reduce = std::any_of(r.kernels.begin(), r.kernels.end(),
                                    [](const CublasKernel& x) { return has(x.name, "splitKreduce"); });
    const bool output = r.reduction_scheme == cublas_reduction_output_type;
    ran.reduction_scheme = !reduce  ? cublas_reduction_none
                           : output ? cublas_reduction_output_type
                                    : cublas_reduction_compute_type;
  }
  return sliced(s, ran.splitk_num.value_or(1), ran,
                fmt::format("cutlass ({} products per MMA, k-tile {})", kpd, block_k));
}

// The template arguments of `kernel<...>` in a name, from the first; empty when it has none.
std::vector<std::string> template_args(const std::string& name, const char* kernel) {
  const auto at = name.find(std::string(kernel) + "<");
  if (at == std::string::npos) return {};
  std::vector<std::string> args;
  std::string arg;
  int depth = 0;
  for (std::size_t i = at + std::string(kernel).size() + 1; i < name.size(); ++i) {
    const char ch = name[i];
    if (depth == 0 && (ch == ',' || ch == '>')) {
      const auto first = arg.find_first_not_of(' ');
      args.push_back(first == std::string::npos ? std::string() : arg.substr(first));
      arg.clear();
      if (ch == '>') return args;
      continue;
    }
    depth += ch == '<' ? 1 : ch == '>' ? -1 : 0;
    arg += ch;
  }
  return {};
}

// Template argument i as a number in 1..65536; 0 when it is none.
int arg_int(const std::vector<std::string>& args, std::size_t i) {
  int v = 0;
  if (i >= args.size()) return 0;
  const auto [end, ec] = std::from_chars(args[i].data(), args[i].data() + args[i].size(), v);
  return ec == std::errc() && v >= 1 && v <= 65536 ? v : 0;
}

// cuBLAS's CUDA-core kernels of thin shapes whose order the H200 captures (fit sets: seeds 41 and 42,
// the second all thin) pinned down, their numbers read from the kernel's template arguments and grid
// (kernel_simt.cpp has the orders):
//  - dot_kernel<float, 128, 0>: split across grid.x blocks, each thread 2 products a tile when
//    torch's N is 1 (both operands run along K: 32 of 32 binary32-output GEMMs) and 1 when M is 1
//    (B strided: 20 of 20); any other shape, or one not known, is not modelled;
//  - gemvNSP_kernel<A, B, C, D, 1, W, V, 1024> with fp16 or bf16 operands: W lanes of V products, a
//    butterfly (34 of 34; the float instances differ and are not modelled);
//  - gemmSN_NN_kernel<float, BLOCK, T, ...>: T threads an output, sub-blocks of 512 / T products (the
//    only sub-block that fits a 2-thread K = 1121 GEMM is 256; bitequiv saw 4 threads change at K > 512).
// gemv2N, gemv2T and internal::gemvx fit no order here: not modelled.
std::optional<RecordedSchedule> cuda_core(KernelSchedule s, const std::string& name, const CublasKernel& main,
                                          long m, long n) {
  s.simt_sub = 0;
  s.simt_vector = 1;
  s.simt_combine = LaneCombine::sequential;
  if (has(name, "dot_kernel<") && arg_int(template_args(name, "dot_kernel"), 1) == 128 &&
      (m == 1 || n == 1)) {
    s.simt = SimtOrder::dot;
    s.simt_vector = n == 1 ? 2 : 1;
    // split_k is the dot order's block count (its blocks merge by reduce_1Block, not a split-K fold).
    s.split_k = static_cast<int>(std::clamp(main.grid[0], 1L, 65536L));
    const std::string family = fmt::format("CUDA-core dot_kernel ({} blocks, {} products a thread a tile)",
                                           s.split_k, s.simt_vector);
    try {
      s.validate();
    } catch (const std::invalid_argument& e) {
      return not_modelled(family, e.what());
    }
    return RecordedSchedule{s, family, ""};
  }
  const bool narrow = has(name, "__half") || has(name, "bfloat16");
  if (has(name, "gemvNSP_kernel<") && narrow) {
    const auto args = template_args(name, "gemvNSP_kernel");
    const int lanes = arg_int(args, 5), vector = arg_int(args, 6);
    if (lanes < 1 || vector < 1 || (lanes & (lanes - 1)) != 0) return std::nullopt;
    s.simt = SimtOrder::gemv;
    s.simt_threads = lanes;
    s.simt_vector = vector;
    s.simt_combine = LaneCombine::butterfly;
    return sliced(s, 1, CublasRecord{},
                  fmt::format("CUDA-core gemvNSP ({} lanes of {} products, butterfly)", lanes, vector));
  }
  if (has(name, "gemmSN_NN_kernel<")) {
    const int threads = arg_int(template_args(name, "gemmSN_NN_kernel"), 2);
    if (threads < 1) return std::nullopt;
    s.simt = SimtOrder::gemmsn;
    s.simt_threads = threads;
    s.simt_sub = std::max(1, 512 / threads);
    return sliced(s, 1, CublasRecord{}, fmt::format("CUDA-core gemmSN ({} threads an output)", threads));
  }
  return std::nullopt;
}

}  // namespace

RecordedSchedule schedule_from_record(const KernelSchedule& base, long k, const CublasRecord& r, long m,
                                      long n) {
  KernelSchedule s = base;
  s.split_k = 1;
  s.residue_tile = 0;
  s.merge = SplitKMerge::workspace;
  const auto main = std::find_if(r.kernels.begin(), r.kernels.end(), [](const CublasKernel& x) {
    return !has(x.name, "splitKreduce") && !has(x.name, "reduce_1Block");
  });
  if (main == r.kernels.end()) {
    if (!r.splitk_num) return not_modelled("nothing recorded", "neither kernels nor SPLITK_NUM");
    // The heuristic alone: its slices over the preset's tile (bitequiv's
    // static tier; which kernel ran is not known).
    return sliced(s, *r.splitk_num, r, "heuristic only (kernels not recorded)");
  }
  const std::string& name = main->name;
  const std::string core = core_name(name);
  if (has(name, "nvjet")) return nvjet(s, core, r);
  // CUDA-core binary32 kernels, each output one FFMA chain over k in order: magma_sgemmEx (bitequiv),
  // and at tf32 shapes with a small K the H200 fit capture's sm80_xmma *ffma* kernels (39 of 39) and
  // cutlass_80_simt_sgemm (10 of 10) bit-exact so; their inputs are binary32, not tf32.
  const bool ffma =
      has(name, "magma_sgemmEx") || has(name, "_simt_sgemm") || (has(name, "xmma") && has(name, "ffma"));
  if (ffma) {
    s.simt = SimtOrder::gemmsn;
    s.simt_threads = 1;
    s.simt_sub = 0;
    return sliced(s, 1, r, "CUDA-core FFMA kernel (one binary32 FFMA chain)");
  }
  if (has(name, "cutlass")) return cutlass(s, core, r, k, *main);
  if (has(name, "xmma")) {
    if (has(name, "segment_k_on"))
      return not_modelled("sm90_xmma segment-K", "segment-K kernels cut each output tile's K their own way");
    if (r.splitk_num.value_or(1) > 1)
      return not_modelled("sm90_xmma split-K", "no xmma split-K kernel was measured");
    return sliced(s, 1, r, "sm90_xmma");
  }
  if (auto simt = cuda_core(s, name, *main, m, n)) return *simt;
  for (const char* simt : {"gemmSN", "gemv", "dot_kernel"})
    if (has(name, simt))
      return not_modelled(fmt::format("CUDA-core {}", simt),
                          "its threads and lanes per output are not measured on this GPU (owed)");
  return not_modelled(name.substr(0, 60), "a kernel the record rules do not know");
}

}  // namespace rpsim::sim
