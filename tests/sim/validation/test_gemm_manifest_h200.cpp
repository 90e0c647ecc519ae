// cuBLAS on the H200 (tests/data/cublas-h200: 10 GEMMs cut from real-GPU
// captures, README there): the device name selects cublas:h100, and the rules
// fitted to the captures (tf32 split-K table and 8-k granules, fp16/bf16
// split-K 3 at K >= 4096, use_fast_accum as one 13-bit chain, mixed e4m3 x
// e5m2, per-tensor scales by product) reproduce every element; the rules they
// replaced do not.
#include <catch2/catch.hpp>

#include <string>

#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/validation/gemm_check.hpp"
#include "rpsim/validation/gemm_manifest.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;
using rpsim::sim::AccumulationModel;

namespace {

fs::path h200(const std::string& name = "") {
  return rpsim::test::source_dir() / "tests" / "data" / "cublas-h200" / name;
}

std::size_t passed_under(const std::string& file, const std::string& spec) {
  const auto dump = rpsim::sim::load_gemm_dump({h200(file)}, rpsim::sim::DumpFormat::numpy);
  return rpsim::sim::check_gemm(dump, AccumulationModel::parse(spec)).passed;
}

}  // namespace

TEST_CASE("gemm manifest cublas H200: the excerpt passes under the presets its device and dtypes select",
          "[gemm][manifest][cublas]") {
  const auto manifest = rpsim::sim::load_gemm_manifest(h200());
  REQUIRE(manifest.gemms.size() == 10);
  const auto r = rpsim::sim::check_gemm_manifest(manifest, {});
  INFO(r.table());
  CHECK(r.passed == 10);
  CHECK(r.failed == 0);
  REQUIRE(r.rows.size() == 10);
  CHECK(r.rows[0].model == "cublas:h100:tf32:fp32");
  CHECK(r.rows[4].model == "cublas:h100:e4m3:fp32:fast_accum=1");
  CHECK(r.rows[5].note == "scales != 1 by scale_epilogue=product: measured (per tensor)");
  CHECK(r.rows[6].model == "cublas:h100:e4m3:fp32:input_b=e5m2");
  CHECK(r.rows[7].model == "cublas:h100:e5m2:fp32:input_b=e4m3:fast_accum=1");
  for (const auto& row : r.rows) CHECK(row.passed == row.total);
}

TEST_CASE("gemm manifest cublas H200: the rules the captures replaced fail on them",
          "[gemm][manifest][cublas]") {
  // tf32: the old guess took the split of the measured shape nearest in log K
  // (K = 256: 8 slices of 32) for 64x64x344 and 128x128x128.
  const std::string old_tf32 = "kernel:h100:tf32:fp32:stored=binary32:split_k=8:split_tile=32";
  CHECK(passed_under("h00_g00004_mm.npz", old_tf32) < 4096);
  CHECK(passed_under("h01_g00010_mm.npz", old_tf32) < 16384);
  CHECK(passed_under("h00_g00004_mm.npz", "cublas:h100:tf32:fp32") == 4096);
  // fp16/bf16 at K = 4096 with M = N = 64: one chain (the old guess) misses.
  CHECK(passed_under("h02_g00003_mm.npz", "kernel:h100:fp16:fp16") < 256);
  CHECK(passed_under("h02_g00003_mm.npz", "cublas:h100:fp16:fp16") == 256);
  // use_fast_accum=True at K = 512: the slow path's promotion every 128 k misses.
  CHECK(passed_under("h04_g00015__scaled_mm.npz", "cublas:h100:e4m3:fp32") < 4096);
  CHECK(passed_under("h04_g00015__scaled_mm.npz", "cublas:h100:e4m3:fp32:fast_accum=1") == 4096);
}

TEST_CASE("gemm manifest cublas H200: the preset's split-K rules", "[gemm][cublas]") {
  using rpsim::sim::kernel_preset;
  namespace f = rpsim::formats;
  const auto tf32 = kernel_preset("cublas:h100", f::tf32(), f::binary32(), 0);
  CHECK(tf32.for_shape(64, 64, 344).split_k == 22);  // measured: 8-k granules, 22 slices of 16
  CHECK(tf32.for_shape(64, 64, 344).split_tile == 8);
  CHECK(tf32.for_shape(128, 128, 128).split_k == 1);
  CHECK(tf32.for_shape(128, 128, 4096).split_k == 22);  // shared/cublas-h100
  const auto half = kernel_preset("cublas:h100", f::binary16(), f::binary32(), 0);
  CHECK(half.for_shape(64, 64, 4096).split_k == 3);
  CHECK(half.for_shape(256, 256, 8192).split_k == 4);  // the H100 grid (an nvjet splitK kernel)
  CHECK(half.for_shape(96, 64, 3072).split_k == 2);    // the held-out H200 miss of "3 once K >= 4096"
  CHECK(half.for_shape(128, 128, 2048).split_k == 1);
  const auto e5m2 = f::e5m2();
  const auto fast = kernel_preset("cublas:h100", f::e4m3(), f::bfloat16(), 0, &e5m2, true);
  CHECK(fast.for_shape(64, 64, 512).promotion == 0);
  CHECK(fast.for_shape(64, 64, 512).instruction.b_input() == e5m2);
  CHECK(kernel_preset("cublas:h100", f::e4m3(), f::bfloat16(), 0).for_shape(64, 64, 512).promotion == 4);
  // The options survive the canonical spec (what results record).
  for (const char* spec : {"cublas:h100:e4m3:binary32:input_b=e5m2:fast_accum=1",
                           "kernel:h100:e5m2:bfloat16:wgmma:input_b=e4m3:promotion=4"})
    CHECK(AccumulationModel::parse(spec).spec() == spec);
  CHECK_THROWS_WITH(kernel_preset("cublas:h100", f::binary16(), f::binary32(), 0, nullptr, true),
                    Catch::Contains("fast_accum=1 with FP8 inputs only"));
  CHECK_THROWS_WITH(kernel_preset("cublas:h100", f::binary16(), f::binary32(), 0, &e5m2),
                    Catch::Contains("only e4m3 x e5m2"));
}
