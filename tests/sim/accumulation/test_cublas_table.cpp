// The cuBLASLt heuristic tables (cublas_table.hpp): the file format, the
// nearest-shape lookup, the errors naming file and line, and cublas:h100
// reading its table when there is one and saying it guessed when there is
// none. The table itself comes from a GPU (owed); this one is written here.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/cublas_record.hpp"
#include "rpsim/accumulation/cublas_table.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"

namespace fs = std::filesystem;
using rpsim::sim::AccumulationModel;
using rpsim::sim::CublasTable;
using rpsim::sim::KernelPreset;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("rpsim-cublas-table-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Two configurations; kind fp16:fp32 on m {64, 256} x n {64} x k {1024, 4093,
// 4096}: config 1 (nvjet splitK) with 3 slices, workspace, at 64 x 64 x 4096;
// config 2 (a cutlass kernel) with 2 slices, serial, at K = 4093.
const char* kTable = R"(rpsim-cublas-table 1
gpu NVIDIA H100 80GB HBM3
library libcublasLt.so.13 130100
spec sim/accumulation/tables/cublas-shapes.json sha256 0
config 0 algo=-1 tile=0 stages=0 custom=0 kernel=
config 1 algo=66 tile=18 stages=22 custom=0 kernel=nvjet_sm90_hss_64x32_64x16_2x2_h_bz_splitK_NNT
config 2 algo=21 tile=5 stages=8 custom=0 kernel=cutlass_80_tensorop_s16816gemm_f16_64x64_32x6_nn_align1
kind fp16:fp32
m 64 256
n 64
k 1024 4093 4096
1.1.2 2.2.0 1.3.2
1.1.2 0.0.0 1.1.2
end
)";

}  // namespace

TEST_CASE("cublas table: read, nearest grid point, no algorithm", "[cublas]") {
  const fs::path dir = scratch("read");
  std::ofstream(dir / "t.txt") << kTable;
  const CublasTable t = CublasTable::read(dir / "t.txt");
  CHECK(t.gpu == "NVIDIA H100 80GB HBM3");
  CHECK(t.kinds() == std::vector<std::string>{"fp16:fp32"});
  CHECK(t.entries() == 6);
  bool exact = false;
  auto r = t.lookup("fp16:fp32", 64, 64, 4096, &exact);
  REQUIRE(r);
  CHECK(exact);
  CHECK(r->splitk_num == 3);
  CHECK(r->reduction_scheme == 2);
  CHECK(r->algo_id == 66);
  CHECK(r->kernels.at(0).name == "nvjet_sm90_hss_64x32_64x16_2x2_h_bz_splitK_NNT");
  // 70 x 60 x 3904: nearest in log2 is 64 x 64 x 4096 (K 8-aligned: not 4093).
  r = t.lookup("fp16:fp32", 70, 60, 3904, &exact);
  REQUIRE(r);
  CHECK(!exact);
  CHECK(r->splitk_num == 3);
  // K = 4091 is not 8-aligned: the unaligned grid point 4093.
  CHECK(t.lookup("fp16:fp32", 64, 64, 4091)->algo_id == 21);
  CHECK(!t.lookup("fp16:fp32", 256, 64, 4093));  // 0.0.0: cuBLASLt had no algorithm
  CHECK(!t.lookup("bf16:fp32", 64, 64, 4096));
  fs::remove_all(dir);
}

TEST_CASE("cublas table: the H200's split counts past 255 and its run-time split", "[cublas]") {
  // The H200's cuBLASLt 13.1 answered SPLITK_NUM 396 at thin shapes, and 4294967295 (-1 read as a
  // uint32) for sm90_xmma tf32 kernels that choose their split when they run (2026-11-29 sweep).
  const fs::path dir = scratch("wide");
  std::string text = kTable;
  text.replace(text.find("1.3.2"), 5, "1.396.2");
  text.replace(text.find("2.2.0"), 5, "2.4294967295.2");
  std::ofstream(dir / "t.txt") << text;
  const CublasTable t = CublasTable::read(dir / "t.txt");
  CHECK(t.lookup("fp16:fp32", 64, 64, 4096)->splitk_num == 396);
  const auto run_time = t.lookup("fp16:fp32", 64, 64, 4093);
  REQUIRE(run_time);  // an algorithm, whose split count is not a number the table holds
  CHECK(!run_time->splitk_num);
  CHECK(run_time->algo_id == 21);
  fs::remove_all(dir);
}

TEST_CASE("cublas table: a malformed file is an error naming the file and line", "[cublas]") {
  const fs::path dir = scratch("bad");
  const auto bad = [&](std::string text, const char* why) {
    std::ofstream(dir / "t.txt") << text;
    CHECK_THROWS_WITH(CublasTable::read(dir / "t.txt"),
                      Catch::Contains((dir / "t.txt").string()) && Catch::Contains(why));
  };
  std::string t = kTable;
  bad("not a table\n", "not an rpsim-cublas-table 1 file");
  bad(t.substr(0, t.find("end")), "no 'end' line");
  bad(std::string(t).replace(t.find("1.3.2"), 5, "1.3"), "t.txt:12: '1.3' is not C.S.R");
  bad(std::string(t).replace(t.find("2.2.0"), 5, "9.2.0"), "'9' is not an integer in 0..2");
  const std::string row2 = "1.1.2 0.0.0 1.1.2";
  bad(std::string(t).replace(t.find(row2), row2.size(), "1.1.2*4"), "'4' is not an integer in 1..3");
  bad(std::string(t).replace(t.find(row2), row2.size(), "1.1.2*3 0.0.0"), "4 entries where the k axis has 3");
  bad(std::string(t).replace(t.find("m 64 256"), 8, "m 256 64"), "the 'm' axis must be increasing");
  fs::remove_all(dir);
}

TEST_CASE("cublas table: cublas:h100 reads its table and says where its slices come from", "[cublas]") {
  const fs::path dir = scratch("preset");
  ::setenv("RPSIM_CUBLAS_TABLES", dir.c_str(), 1);
  auto p = std::get<KernelPreset>(AccumulationModel::parse("cublas:h100:fp16:fp32").variant());
  // No table: today's guess, said so.
  CHECK_THAT(p.source(64, 64, 4096),
             Catch::StartsWith("guess: the nearest H100-measured shape") &&
                 Catch::Contains("no heuristic table " + (dir / "cublas-h100.txt").string()));
  std::ofstream(dir / "cublas-h100.txt") << kTable;
  // 64 x 64 x 4096: the table's nvjet splitK, 3 slices of 64 (the grid's guess there is 3 too).
  CHECK_THAT(p.source(64, 64, 4096),
             Catch::StartsWith("cuBLASLt heuristic table") &&
                 Catch::Contains("nvjet, split-K 3 x 64-k tiles, binary32 workspace"));
  // 64 x 64 x 1024: the table says one slice where the grid holds one too; at
  // 256 x 64 x 1024 the table (1) against the grid's shape (1): read from the table.
  CHECK(p.for_shape(64, 64, 1000).split_k == 1);
  // K = 4093: the cutlass kernel, 2 slices of CUTLASS's 8-k grain, serial
  // merge, 16 products per MMA, residue tile 32.
  const auto s = p.for_shape(64, 64, 4093);
  CHECK(s.split_k == 2);
  CHECK(s.split_tile == 8);
  CHECK(s.merge == rpsim::sim::SplitKMerge::serial);
  CHECK(s.residue_tile == 32);
  // A kind the table lacks: the guess, said so.
  auto bf = std::get<KernelPreset>(AccumulationModel::parse("cublas:h100:bf16:bf16").variant());
  CHECK_THAT(bf.source(64, 64, 4096), Catch::Contains("holds no kind bf16:bf16:rpr0"));
  ::unsetenv("RPSIM_CUBLAS_TABLES");
  fs::remove_all(dir);
}

TEST_CASE("cublas table: a recorded call is read over the preset's guess, not its table entry", "[cublas]") {
  // The table's cutlass entry at K = 4093 sets a 32-k residue tile and 2 serial slices; a record of
  // the same shape naming an nvjet kernel must not inherit them (it did through for_shape).
  const fs::path dir = scratch("base");
  ::setenv("RPSIM_CUBLAS_TABLES", dir.c_str(), 1);
  std::ofstream(dir / "cublas-h100.txt") << kTable;
  const auto p = std::get<KernelPreset>(AccumulationModel::parse("cublas:h100:fp16:fp32").variant());
  CHECK(p.for_shape(64, 64, 4093).residue_tile == 32);
  const auto base = p.base_for_shape(64, 64, 4093);
  CHECK(base.residue_tile == 0);
  CHECK(base.merge == rpsim::sim::SplitKMerge::workspace);
  rpsim::sim::CublasRecord nvjet;
  nvjet.splitk_num = 1;
  nvjet.kernels = {{"nvjet_sm90_hsh_64x32_64x16_2x2_h_bz_NNT", {4, 4, 1}}};
  const auto got = rpsim::sim::schedule_from_record(base, 4093, nvjet);
  REQUIRE(got.schedule);
  CHECK(got.schedule->residue_tile == 0);
  CHECK(got.schedule->split_k == 1);
  ::unsetenv("RPSIM_CUBLAS_TABLES");
  fs::remove_all(dir);
}
