// A recorded cuBLAS call read into a schedule (cublas_record.hpp), checked on
// real H100 data: the cases of tests/data/cublas-h100-grid (session-10 grid
// and rand captures) recorded the kernels each GEMM launched, and their
// stored 8x8 blocks of D are rebuilt from the capture's input hash. The
// record's rules (kernel names, cutlass grid.z and grain, splitKreduce's
// workspace) must reproduce every block; SPLITK_NUM, which those captures
// did not ask cuBLASLt for, is the measured slice count (the preset's grid
// entry for these measured shapes).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/cublas_record.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"
#include "shared_data.hpp"

using rpsim::sim::AccumulationModel;
using rpsim::sim::CublasKernel;
using rpsim::sim::CublasRecord;
using rpsim::sim::KernelPreset;
using rpsim::sim::Matrix;

namespace {

// The capture's input hash (grid.py hashed(), as test_cublas_h100_grid.py ports it).
double hashed(std::int64_t idx, std::int64_t salt, int p) {
  constexpr std::int64_t mask = 0xFFFFFFFF, mul = 0x45D9F3B;
  std::int64_t h = (idx + salt) & mask;
  h = (((h >> 16) ^ h) * mul) & mask;
  h = (((h >> 16) ^ h) * mul) & mask;
  h = (h >> 16) ^ h;
  const std::int64_t mant = (h & ((std::int64_t(1) << p) - 1)) + (std::int64_t(1) << p);
  const int e = int((h >> p) % 5) - 3 - p;
  const int s = 1 - 2 * int((h >> 31) & 1);
  return std::ldexp(double(s * mant), e);
}

CublasKernel kernel_of(const std::string& text) {
  static const std::regex grid(R"( grid=\[(\d+), (\d+), (\d+)\])");
  std::smatch m;
  CublasKernel k{text, {0, 0, 0}};
  if (std::regex_search(text, m, grid)) {
    k.name = text.substr(0, std::size_t(m.position(0)));
    k.grid = {std::stol(m[1].str()), std::stol(m[2].str()), std::stol(m[3].str())};
  }
  return k;
}

// The capture's input bits of a case's variant (tf32 23, fp16 10, bf16 7, e4m3 3).
int capture_bits(const std::string& variant) {
  return variant.starts_with("tf32")   ? 23
         : variant.starts_with("fp16") ? 10
         : variant.starts_with("bf16") ? 7
                                       : 3;
}

// Entries of the case's stored blocks of D (rows x cols each) that `schedule` does not reproduce, A and B
// rebuilt from the capture's index hash.
int block_mismatches(const rpsim::sim::KernelSchedule& schedule, const nlohmann::json& c, int rows,
                     int cols) {
  const long n = c.at("n"), k = c.at("k"), i = c.at("i");
  const int p = capture_bits(c.at("variant"));
  const std::int64_t sa = 1'000'003 * i + 17, sb = 1'000'003 * i + 500'009;
  int bad = 0;
  for (std::size_t blk = 0; blk < c.at("blocks").size(); ++blk) {
    const long r0 = c.at("blocks")[blk][0], c0 = c.at("blocks")[blk][1];
    Matrix a(8, k), b(k, 8);
    for (long r = 0; r < 8; ++r)
      for (long t = 0; t < k; ++t) a(r, t) = hashed((r0 + r) * k + t, sa, p);
    for (long t = 0; t < k; ++t)
      for (long q = 0; q < 8; ++q) b(t, q) = hashed(t * n + c0 + q, sb, p);
    const Matrix d = rpsim::sim::gemm(AccumulationModel(schedule), a, b);
    for (int e = 0; e < rows * cols; ++e) {
      const float f = float(d(e / cols, e % cols));
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      bad += bits != c.at("d")[blk][std::size_t(e)].get<std::uint32_t>();
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("cublas record: the H100 grid's recorded kernels reproduce their blocks of D", "[cublas]") {
  const auto path = rpsim::test::source_dir() / "tests" / "data" / "cublas-h100-grid" / "cases.json";
  std::ifstream in(path);
  REQUIRE(in);  // part of the checkout
  const auto cases = nlohmann::json::parse(in).at("cases");
  int checked = 0, cutlass = 0, split = 0;
  for (const auto& c : cases) {
    const long m = c.at("m"), n = c.at("n"), k = c.at("k");
    const std::string variant = c.at("variant");
    const auto model = AccumulationModel::parse(c.at("preset").get<std::string>());
    const auto& preset = std::get<KernelPreset>(model.variant());
    const auto guess = preset.for_shape(m, n, k);
    CublasRecord rec;
    for (const auto& kt : c.at("kernels")) rec.kernels.push_back(kernel_of(kt.get<std::string>()));
    if (rec.kernels.front().name.find("splitK") != std::string::npos) rec.splitk_num = guess.split_k;
    const auto got = rpsim::sim::schedule_from_record(guess, k, rec);
    INFO(variant << " " << m << "x" << n << "x" << k << ": " << got.family << " " << got.why);
    if (!got.schedule) {
      // The one family the rules refuse: segment-K (none in this excerpt).
      CHECK(got.family.find("segment-K") != std::string::npos);
      continue;
    }
    cutlass += got.family.starts_with("cutlass");
    split += got.schedule->split_k > 1;
    CHECK(block_mismatches(*got.schedule, c, 8, 8) == 0);
    ++checked;
  }
  CHECK(checked >= 50);
  CHECK(cutlass >= 8);  // tf32 split-K by grid.z and CUTLASS's grain
  CHECK(split >= 20);
}

TEST_CASE("cublas record: each family's rule", "[cublas]") {
  const auto preset = std::get<KernelPreset>(AccumulationModel::parse("cublas:h100:fp16:fp16").variant());
  const auto base = preset.for_shape(64, 64, 4096);
  CublasRecord r;
  r.kernels = {{"nvjet_sm90_hsh_64x32_64x16_2x2_h_bz_splitK_NNT", {4, 6, 1}}};
  auto got = rpsim::sim::schedule_from_record(base, 4096, r);
  CHECK(!got.schedule);  // nvjet splitK without SPLITK_NUM: the count is not in the name
  CHECK(got.why.find("SPLITK_NUM") != std::string::npos);
  r.splitk_num = 5;
  r.reduction_scheme = rpsim::sim::cublas_reduction_output_type;
  got = rpsim::sim::schedule_from_record(base, 4096, r);
  REQUIRE(got.schedule);
  CHECK(got.schedule->split_k == 5);
  CHECK(got.schedule->merge == rpsim::sim::SplitKMerge::output_partials);
  CHECK(got.family == "nvjet, split-K 5 x 64-k tiles, partials in the output format");
  r.reduction_scheme = rpsim::sim::cublas_reduction_inplace;
  CHECK(rpsim::sim::schedule_from_record(base, 4096, r).why.find("atomic") != std::string::npos);
  // cutlass s1688 fp16 on K = 4093: 8 products per MMA, k-tile 32 leads with
  // the residue, slices of CUTLASS's 8-k grain (4093 is no multiple of 64).
  CublasRecord c;
  c.kernels = {
      {"void cutlass::Kernel2<cutlass_80_tensorop_f16_s1688gemm_f16_64x64_32x10_nn_align1>(...)", {1, 1, 3}},
      {"cublasLt::splitKreduce_kernel<...>", {1, 1, 1}}};
  got = rpsim::sim::schedule_from_record(base, 4093, c);
  REQUIRE(got.schedule);
  CHECK(got.schedule->instruction.terms_per_step == 8);
  CHECK(got.schedule->residue_tile == 32);
  CHECK(got.schedule->split_k == 3);  // grid.z
  CHECK(got.schedule->split_tile == 8);
  CHECK(got.schedule->merge == rpsim::sim::SplitKMerge::workspace);  // a splitKreduce kernel ran
  // Without a reduce kernel, the slices merge in the GEMM kernel: serial.
  c.kernels.pop_back();
  CHECK(rpsim::sim::schedule_from_record(base, 4093, c).schedule->merge == rpsim::sim::SplitKMerge::serial);
  // Families no schedule models say why.
  for (const char* name :
       {"sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize256x128x32_execute_segment_k_on_kernel",
        "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true>(...)",
        "void gemv2T_kernel_val<int, int, __half, __half, float, float, 128, 16, 4, 4, false>"}) {
    CublasRecord x;
    x.kernels = {{name, {1, 1, 1}}};
    got = rpsim::sim::schedule_from_record(base, 4096, x);
    CHECK(!got.schedule);
    CHECK(!got.why.empty());
  }
  // magma_sgemmEx: one FFMA chain.
  CublasRecord mg;
  mg.kernels = {{"magma_sgemmEx_kernel<...>", {1, 1, 1}}};
  got = rpsim::sim::schedule_from_record(base, 300, mg);
  REQUIRE(got.schedule);
  CHECK(got.schedule->simt == rpsim::sim::SimtOrder::gemmsn);
}

TEST_CASE("cublas record: the H200 fit capture's records reproduce their blocks of D", "[cublas]") {
  // tests/data/cublas-h200-fit: 59 GEMMs of the seed-41 and seed-42 fit captures, a few per rule (README
  // there), each with cuBLASLt's heuristic answer and the kernels it launched, read as gemm-check reads a
  // capture. Thin GEMMs (M or N < 8) keep blocks of min(8, M) x min(8, N).
  const auto path = rpsim::test::source_dir() / "tests" / "data" / "cublas-h200-fit" / "cases.json";
  std::ifstream in(path);
  REQUIRE(in);  // part of the checkout
  const auto cases = nlohmann::json::parse(in).at("cases");
  std::map<std::string, int> families;
  for (const auto& c : cases) {
    const long m = c.at("m"), n = c.at("n"), k = c.at("k");
    const std::string variant = c.at("variant");
    const auto model = AccumulationModel::parse(c.at("preset").get<std::string>());
    const auto& h = c.at("heuristic");
    CublasRecord rec;
    rec.splitk_num = h.at("splitk_num").get<int>();
    rec.reduction_scheme = h.at("reduction_scheme").get<int>();
    for (const auto& kt : c.at("kernels"))
      rec.kernels.push_back({kt.at("name"), {kt.at("grid")[0], kt.at("grid")[1], kt.at("grid")[2]}});
    const auto got = rpsim::sim::schedule_from_record(
        std::get<KernelPreset>(model.variant()).for_shape(m, n, k), k, rec, m, n);
    INFO(variant << " " << m << "x" << n << "x" << k << " (" << c.at("family") << "): " << got.family << " "
                 << got.why);
    REQUIRE(got.schedule);
    CHECK(block_mismatches(*got.schedule, c, c.at("block_shape")[0], c.at("block_shape")[1]) == 0);
    ++families[c.at("family")];
  }
  CHECK(families.size() == 11);  // every rule of the README's list has cases
  CHECK(cases.size() == 59);
}

TEST_CASE("cublas record: what ran beats what the heuristic answered (H200 rules)", "[cublas]") {
  const auto preset = std::get<KernelPreset>(AccumulationModel::parse("cublas:h100:fp16:fp32").variant());
  const auto base = preset.for_shape(256, 256, 1027);
  // cutlass_75 names carry no threadblock k: CUTLASS's SM75 default, 32.
  CublasRecord c;
  c.splitk_num = 1;
  c.kernels = {{"cutlass::Kernel2<cutlass_75_tensorop_s1688gemm_f16_64x64_nn_align1>", {4, 4, 1}}};
  auto got = rpsim::sim::schedule_from_record(base, 1027, c);
  REQUIRE(got.schedule);
  CHECK(got.schedule->residue_tile == 32);
  CHECK(got.family == "cutlass (8 products per MMA, k-tile 32)");
  // REDUCTION_SCHEME INPLACE with grid.z slices and no reduce kernel: the slices take turns on D.
  c.splitk_num = 3;
  c.reduction_scheme = rpsim::sim::cublas_reduction_inplace;
  c.kernels.front().grid = {4, 4, 3};
  got = rpsim::sim::schedule_from_record(base, 1027, c);
  REQUIRE(got.schedule);
  CHECK(got.schedule->split_k == 3);
  CHECK(got.schedule->merge == rpsim::sim::SplitKMerge::serial);
  // The kernel ran one slice (grid.z 1) where the heuristic said 3: one chain.
  c.kernels.front().grid = {4, 4, 1};
  got = rpsim::sim::schedule_from_record(base, 1027, c);
  REQUIRE(got.schedule);
  CHECK(got.schedule->split_k == 1);
  // A reduce kernel ran: the workspace, or the output partials REDUCTION_SCHEME names.
  c.kernels = {{"cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_f16_64x64_32x10_nn_align1>", {4, 4, 2}},
               {"cublasLt::splitKreduce_kernel<32, 16, int, float, float>", {8, 8, 1}}};
  got = rpsim::sim::schedule_from_record(base, 1027, c);
  REQUIRE(got.schedule);
  CHECK(got.schedule->split_k == 2);
  CHECK(got.schedule->merge == rpsim::sim::SplitKMerge::workspace);
  c.reduction_scheme = rpsim::sim::cublas_reduction_output_type;
  CHECK(rpsim::sim::schedule_from_record(base, 1027, c).schedule->merge ==
        rpsim::sim::SplitKMerge::output_partials);
  // CUDA-core binary32 kernels: one FFMA chain each.
  for (const char* name :
       {"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4",
        "cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>"}) {
    CublasRecord x;
    x.kernels = {{name, {1, 1, 1}}};
    got = rpsim::sim::schedule_from_record(base, 40, x);
    REQUIRE(got.schedule);
    CHECK(got.schedule->simt == rpsim::sim::SimtOrder::gemmsn);
    CHECK(got.family == "CUDA-core FFMA kernel (one binary32 FFMA chain)");
  }
}

TEST_CASE("cublas record: thin shapes' CUDA-core kernels (H200 rules)", "[cublas]") {
  const auto preset = std::get<KernelPreset>(AccumulationModel::parse("cublas:h100:fp16:fp32").variant());
  const auto base = preset.for_shape(256, 256, 1027);
  // One launched kernel's record read for a GEMM of K products (M and N: 0 not known).
  const auto read = [&](const char* name, std::array<long, 3> grid, long k, long m = 0, long n = 0) {
    CublasRecord r;
    r.kernels = {{name, grid}, {"reduce_1Block_kernel<float, 128, 7>", {1, 1, 1}}};
    return rpsim::sim::schedule_from_record(base, k, r, m, n).schedule;
  };
  // dot_kernel: grid.x blocks; 2 products a thread a tile when N is 1, 1 when M is 1, else not modelled.
  const char* dot = "dot_kernel<float, 128, 0, cublasDotParams<cublasGemvTensorStridedBatched<float const>>>";
  auto got = read(dot, {33, 1, 78}, 14803, 78, 1);
  REQUIRE(got);
  CHECK(got->simt == rpsim::sim::SimtOrder::dot);
  CHECK(got->split_k == 33);
  CHECK(got->simt_vector == 2);
  CHECK(read(dot, {33, 1, 78}, 14803, 1, 78)->simt_vector == 1);
  CHECK(!read(dot, {33, 1, 78}, 14803));
  // gemvNSP<..., 1, W, V, ...> with fp16 / bf16 operands: W lanes of V, a butterfly; binary32 ones differ.
  got = read("gemvNSP_kernel<__half, float, float, float, 1, 32, 4, 1024, false, cublasGemvParamsEx<int>>",
             {14, 1, 1}, 82);
  REQUIRE(got);
  CHECK(got->simt == rpsim::sim::SimtOrder::gemv);
  CHECK(got->simt_threads == 32);
  CHECK(got->simt_vector == 4);
  CHECK(got->simt_combine == rpsim::sim::LaneCombine::butterfly);
  CHECK(!read("gemvNSP_kernel<float, float, float, float, 1, 16, 4, 1024, false, cublasGemvParamsEx<int>>",
              {9, 1, 1}, 121));
  // gemmSN_NN<float, B, T, ...>: T threads an output, sub-blocks of 512 / T.
  got =
      read("gemmSN_NN_kernel<float, 128, 2, 4, 8, 2, 4, false, cublasGemvTensorStridedBatched<__half const>>",
           {1, 1, 1}, 60);
  REQUIRE(got);
  CHECK(got->simt == rpsim::sim::SimtOrder::gemmsn);
  CHECK(got->simt_threads == 2);
  CHECK(got->simt_sub == 256);
  // gemv2N and gemv2T fit no order on the H200 captures: still named, not modelled.
  CHECK(!read("gemv2N_kernel<int, int, float, float, float, float, 128, 2, 4, 4, 1, false>", {5, 1, 1}, 82));
}
