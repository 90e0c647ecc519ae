// A recorded cuBLAS call read into a schedule (cublas_record.hpp), checked on
// real H100 data: the cases of tests/data/cublas-h100-grid (session-10 grid
// and rand captures) recorded the kernels each GEMM launched, and their
// stored 8x8 blocks of D are rebuilt from the capture's input hash. The
// record's rules (kernel names, cutlass grid.z and grain, splitKreduce's
// workspace) must reproduce every block; SPLITK_NUM, which those captures
// did not ask cuBLASLt for, is the measured slice count (the preset's grid
// entry for these measured shapes).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
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

}  // namespace

TEST_CASE("cublas record: the H100 grid's recorded kernels reproduce their blocks of D", "[cublas]") {
  const auto path = rpsim::test::source_dir() / "tests" / "data" / "cublas-h100-grid" / "cases.json";
  std::ifstream in(path);
  REQUIRE(in);  // part of the checkout
  const auto cases = nlohmann::json::parse(in).at("cases");
  int checked = 0, cutlass = 0, split = 0;
  for (const auto& c : cases) {
    const long m = c.at("m"), n = c.at("n"), k = c.at("k"), i = c.at("i");
    const std::string variant = c.at("variant");
    const int p = variant.starts_with("tf32")   ? 23
                  : variant.starts_with("fp16") ? 10
                  : variant.starts_with("bf16") ? 7
                                                : 3;
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
    const std::int64_t sa = 1'000'003 * i + 17, sb = 1'000'003 * i + 500'009;
    for (std::size_t blk = 0; blk < c.at("blocks").size(); ++blk) {
      const long r0 = c.at("blocks")[blk][0], c0 = c.at("blocks")[blk][1];
      Matrix a(8, k), b(k, 8);
      for (long r = 0; r < 8; ++r)
        for (long t = 0; t < k; ++t) a(r, t) = hashed((r0 + r) * k + t, sa, p);
      for (long t = 0; t < k; ++t)
        for (long q = 0; q < 8; ++q) b(t, q) = hashed(t * n + c0 + q, sb, p);
      const Matrix d = rpsim::sim::gemm(AccumulationModel(*got.schedule), a, b);
      int bad = 0;
      for (int e = 0; e < 64; ++e) {
        const float f = float(d(e / 8, e % 8));
        std::uint32_t bits;
        std::memcpy(&bits, &f, 4);
        bad += bits != c.at("d")[blk][std::size_t(e)].get<std::uint32_t>();
      }
      CHECK(bad == 0);
    }
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
