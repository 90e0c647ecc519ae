// torch._scaled_mm on the H100 with per-row scales and with a bias
// (tests/data/cublas-h100-scaled: 6 GEMMs cut from real-GPU captures, README
// there). The preset the manifest selects applies per-row scales B's first,
// fl32(sa * fl32(sb * acc)) (scale_epilogue=b_then_a), per-tensor ones as one
// product, and adds a bias after the scaled sum is rounded to binary32: every
// element is reproduced; the other epilogues miss some.
#include <catch2/catch.hpp>

#include <string>

#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/validation/gemm_manifest.hpp"
#include "shared_data.hpp"

namespace fs = std::filesystem;
using rpsim::sim::AccumulationModel;
using rpsim::sim::GemmManifest;
using rpsim::sim::KernelPreset;

namespace {

fs::path excerpt() {
  return rpsim::test::source_dir() / "tests" / "data" / "cublas-h100-scaled";
}

// The manifest holding only its entry `i`.
GemmManifest only(const GemmManifest& m, std::size_t i) {
  GemmManifest one = m;
  one.gemms = {m.gemms.at(i)};
  return one;
}

// Elements of GEMM `i` bit-exact under the schedule its preset selects, with
// the scale epilogue replaced by `how`.
std::size_t passed_with_epilogue(const GemmManifest& m, std::size_t i, const std::string& how) {
  const auto& g = m.gemms.at(i);
  const auto preset = AccumulationModel::parse(rpsim::sim::select_gemm_model(g, m, {}));
  auto schedule = std::get<KernelPreset>(preset.variant()).for_shape(g.m, g.n, g.k);
  rpsim::sim::find_schedule_field("scale_epilogue")->set(schedule, how);
  const auto r = rpsim::sim::check_gemm_manifest(only(m, i), {AccumulationModel(schedule).spec()});
  INFO(r.table());
  REQUIRE(r.rows.size() == 1);
  return r.rows[0].passed;
}

}  // namespace

TEST_CASE("gemm manifest cublas H100 scaled: per-row scales and biases pass under the selected presets",
          "[gemm][manifest][cublas]") {
  const auto m = rpsim::sim::load_gemm_manifest(excerpt());
  REQUIRE(m.gemms.size() == 6);
  const auto r = rpsim::sim::check_gemm_manifest(m, {});
  INFO(r.table());
  CHECK(r.passed == 6);
  CHECK(r.failed == 0);
  REQUIRE(r.rows.size() == 6);
  CHECK(r.rows[0].model == "cublas:h100:e4m3:fp32:scales=row");
  CHECK(r.rows[1].model == "cublas:h100:e4m3:fp32:fast_accum=1:scales=row");
  CHECK(r.rows[3].model == "cublas:h100:e4m3:bf16:rpr=1:scales=row");
  CHECK(r.rows[0].note == "scales != 1 by scale_epilogue=b_then_a: measured (per row)");
  CHECK(r.rows[4].model == "cublas:h100:e4m3:fp16:rpr=1");
  CHECK(r.rows[4].note == "scales != 1 by scale_epilogue=product: measured (per tensor)");
  CHECK(r.rows[5].note == "scales != 1 by scale_epilogue=b_then_a: measured (per row)");
  for (const auto& row : r.rows) CHECK(row.passed == row.total);
}

TEST_CASE("gemm manifest cublas H100 scaled: the epilogues the captures rule out miss elements",
          "[gemm][manifest][cublas]") {
  const auto m = rpsim::sim::load_gemm_manifest(excerpt());
  REQUIRE(m.gemms.size() == 6);
  // Per-row ->fp32, slow and fast: one product of the scales (the per-tensor
  // epilogue) and A's scale first each miss about a third.
  for (const std::size_t i : {std::size_t{0}, std::size_t{1}}) {
    CHECK(passed_with_epilogue(m, i, "b_then_a") == 4096);
    CHECK(passed_with_epilogue(m, i, "product") < 2800);
    CHECK(passed_with_epilogue(m, i, "a_then_b") < 2800);
  }
  CHECK(passed_with_epilogue(m, 2, "b_then_a") == 256);
  CHECK(passed_with_epilogue(m, 2, "product") == 166);
  // ->bf16 hides most of it: one element of the cut (D[93, 14] of the call).
  CHECK(passed_with_epilogue(m, 3, "b_then_a") == 256);
  CHECK(passed_with_epilogue(m, 3, "product") == 255);
  // Per tensor with a bias: the scaled sum rounded before C joins, not one fma.
  CHECK(passed_with_epilogue(m, 4, "product") == 4096);
  CHECK(passed_with_epilogue(m, 4, "fused") == 4095);
  // Per row with a bias: the same, B's scale first.
  CHECK(passed_with_epilogue(m, 5, "b_then_a") == 4096);
  CHECK(passed_with_epilogue(m, 5, "fused") == 4095);
  CHECK(passed_with_epilogue(m, 5, "a_then_b") == 4095);
}

TEST_CASE("gemm manifest cublas H100 scaled: a preset given per-row scales applies their epilogue",
          "[gemm][manifest][cublas]") {
  // rpsim.gemm / gemm() with a cublas preset and Mx1 / 1xN scales, as
  // torch._scaled_mm picks its per-row path from the scales' shape: the
  // manifest checked under the plain preset names (no scales=row) passes too.
  const auto m = rpsim::sim::load_gemm_manifest(excerpt());
  const auto r = rpsim::sim::check_gemm_manifest(only(m, 0), {"cublas:h100:e4m3:fp32"});
  INFO(r.table());
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0].passed == 4096);
  CHECK(r.rows[0].note == "scales != 1 by scale_epilogue=b_then_a: measured (per row)");
}
