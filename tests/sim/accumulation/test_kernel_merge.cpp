// Issue #40's additions to the kernel-schedule layer, on data built so that
// each alternative gives other bits: the three split-K merges (cuBLASLt's
// REDUCTION_SCHEME), the sum starting at partial 0 (a -0 survives), CUTLASS's
// k-residue placement, and the family each schedule names.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/accumulation/tensor_core.hpp"

using rpsim::sim::AccumulationModel;
using rpsim::sim::KernelSchedule;
using rpsim::sim::Matrix;
using rpsim::sim::SplitKMerge;

namespace {

KernelSchedule schedule(const std::string& spec) {
  return std::get<KernelSchedule>(AccumulationModel::parse(spec).variant());
}

Matrix random_in(Eigen::Index r, Eigen::Index c, const rpsim::Format& f, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = nd(rng);
  return rpsim::sim::round_to_format(m, f);
}

}  // namespace

TEST_CASE("kernel merge: the three split-K merges give three results on one set of partials", "[kernel]") {
  // u = 2^-13; partials 1 + 3.5u, -2.5u, -2.5u (binary32), output fp16
  // (ulp 2^-10 = 8u above 1, 4u below):
  //  workspace: 1 - 1.5u summed in binary32, one rounding -> 1;
  //  output_partials: 1, -2.5u, -2.5u (each already fp16: 5 x 2^-14) -> 1 - 5u -> 1 - 4u;
  //  serial: 1, then fp16(1 - 2.5u) = 1 - 4u, then fp16(1 - 6.5u) = 1 - 8u.
  const double u = std::ldexp(1.0, -13);
  const std::vector<double> partials{1 + 3.5 * u, -2.5 * u, -2.5 * u};
  KernelSchedule s = schedule("kernel:h100:fp16:fp16:split_k=3");
  CHECK(rpsim::sim::merge_partials(s, partials) == 1.0);
  s.merge = SplitKMerge::output_partials;
  CHECK(rpsim::sim::merge_partials(s, partials) == 1 - 4 * u);
  s.merge = SplitKMerge::serial;
  CHECK(rpsim::sim::merge_partials(s, partials) == 1 - 8 * u);
  // With a binary32 output the three are one sum.
  for (const auto m : {SplitKMerge::workspace, SplitKMerge::output_partials, SplitKMerge::serial}) {
    KernelSchedule f = schedule("kernel:h100:fp16:fp32:split_k=3");
    f.merge = m;
    CHECK(rpsim::sim::merge_partials(f, partials) ==
          double(float(float(partials[0] + partials[1]) + partials[2])));
  }
}

TEST_CASE("kernel merge: a GEMM under each merge differs from the others where the output is narrow",
          "[kernel]") {
  const Matrix a = random_in(24, 4096, rpsim::formats::binary16(), 11);
  const Matrix b = random_in(4096, 24, rpsim::formats::binary16(), 12);
  std::vector<Matrix> d;
  for (const char* merge : {"workspace", "output_partials", "serial"})
    d.push_back(rpsim::sim::gemm(
        AccumulationModel::parse(std::string("kernel:h100:fp16:fp16:split_k=4:merge=") + merge), a, b));
  const auto differ = [](const Matrix& x, const Matrix& y) { return (x.array() != y.array()).count(); };
  CHECK(differ(d[0], d[1]) > 0);
  CHECK(differ(d[0], d[2]) > 0);
  CHECK(differ(d[1], d[2]) > 0);
  // The spec names the merge and reads it back.
  const auto m = AccumulationModel::parse("kernel:h100:fp16:fp16:split_k=4:merge=serial");
  CHECK(m.spec() == "kernel:h100:binary16:binary16:split_k=4:merge=serial");
  CHECK_THROWS_WITH(AccumulationModel::parse("kernel:h100:fp16:fp16:split_k=4:merge=atomic"),
                    Catch::Contains("merge='atomic' is not one of workspace output_partials serial"));
  CHECK_THROWS_WITH(
      AccumulationModel::parse("kernel:h100:fp16:fp16:split_k=4:merge=serial:reduction=pairwise"),
      Catch::Contains("needs reduction=sequential"));
}

TEST_CASE("kernel merge: the sum starts at partial 0, so a -0 partial stays -0", "[kernel]") {
  // bitequiv's splitk_combine: +0 + (-0) = +0 would lose the sign that
  // cuBLAS's epilogue (beta = 0) keeps.
  const KernelSchedule s = schedule("kernel:h100:fp16:fp32:split_k=2");
  const double d = rpsim::sim::merge_partials(s, {-0.0, -0.0});
  CHECK(d == 0.0);
  CHECK(std::signbit(d));
  CHECK(!std::signbit(0.0f + -0.0f + -0.0f));  // what a zero start would give
  // A C of +0 is beta = 0 (no C): the -0 stays.
  CHECK(std::signbit(rpsim::sim::merge_partials(s, {-0.0, -0.0}, 0.0)));
  KernelSchedule serial = schedule("kernel:h100:fp16:fp16:split_k=2:merge=serial");
  CHECK(std::signbit(rpsim::sim::merge_partials(serial, {-0.0, -0.0})));
}

TEST_CASE("kernel residue: CUTLASS's partial MMA sits at floor(RES/KPD) of the first tile", "[kernel]") {
  // K = 44 with 8 products per MMA and a k-tile of 32: RES = 12, so the MMAs
  // cover [0,8) [8,12) [12,20) [20,28) [28,36) [36,44) (bitequiv's rule), not
  // [0,8) ... [32,40) [40,44) (the short one last).
  const auto base = std::string("kernel:h100:fp16:fp32:terms_per_step=8");
  const KernelSchedule res = schedule(base + ":residue_tile=32");
  const auto chunks = res.chunks(44);
  REQUIRE(chunks.size() == 1);
  CHECK(chunks[0].lead == 12);
  CHECK(schedule(base + ":residue_tile=32:split_k=2:split_tile=8").chunks(44).at(1).lead == 20 % 32);
  CHECK(schedule(base + ":residue_tile=16").chunks(48).at(0).lead == 0);  // a whole number of tiles
  // The GEMM against the instruction stepped through those boundaries by hand.
  const rpsim::sim::TensorCoreModel m = res.instruction;
  const Matrix a = random_in(16, 44, rpsim::formats::binary16(), 5);
  const Matrix b = random_in(44, 1, rpsim::formats::binary16(), 6);
  const auto by_hand = [&](Eigen::Index i, const std::vector<int>& bounds) {
    std::vector<double> row(44), col(44);
    for (int k = 0; k < 44; ++k) row[std::size_t(k)] = a(i, k), col[std::size_t(k)] = b(k, 0);
    double acc = 0;
    for (std::size_t q = 0; q + 1 < bounds.size(); ++q)
      acc = rpsim::sim::tensor_core_step(m, row.data() + bounds[q], col.data() + bounds[q],
                                         bounds[q + 1] - bounds[q], acc);
    return acc;
  };
  const Matrix d_res = rpsim::sim::gemm(AccumulationModel(res), a, b);
  const Matrix d_last = rpsim::sim::gemm(AccumulationModel::parse(base), a, b);
  int differ = 0;
  for (Eigen::Index i = 0; i < a.rows(); ++i) {
    CHECK(d_res(i, 0) == by_hand(i, {0, 8, 12, 20, 28, 36, 44}));
    CHECK(d_last(i, 0) == by_hand(i, {0, 8, 16, 24, 32, 40, 44}));
    differ += d_res(i, 0) != d_last(i, 0);
  }
  CHECK(differ > 0);  // the data tell the placements apart
  CHECK_THROWS_WITH(AccumulationModel::parse("kernel:h100:e4m3:fp32:wgmma:promotion=4:residue_tile=32"),
                    Catch::Contains("residue_tile needs promotion=0"));
}

TEST_CASE("kernel family: what --infer and gemm-check name", "[kernel]") {
  CHECK(rpsim::sim::schedule_family(schedule("kernel:h100:fp16:fp32"), 256) == "one Tensor Core chain");
  CHECK(rpsim::sim::schedule_family(schedule("kernel:h100:fp16:fp16:split_k=3:merge=serial"), 4096) ==
        "split-K 3 x 64-k tiles, serial in the output format");
  CHECK(rpsim::sim::schedule_family(schedule("kernel:h100:e4m3:fp32:wgmma:promotion=4"), 1024) ==
        "FP8 two-level: promoted every 4 instructions");
  CHECK(rpsim::sim::schedule_family(schedule("kernel:h100:fp16:fp32:terms_per_step=8:residue_tile=32"), 44) ==
        "one Tensor Core chain; CUTLASS residue tile 32 (a partial tile leads)");
  CHECK(rpsim::sim::schedule_family(schedule("kernel:h100:fp16:fp32:simt=gemmsn:simt_threads=4:simt_sub=128"),
                                    1024) == "CUDA-core gemmSN (4 threads, sub-blocks of 128)");
}
