// gemm_fold_group (issue #30: --infer's variations of one schedule share
// their chunk chains) gives, for every schedule of the group, the bits gemm()
// gives under that schedule alone: random operands, random groups of fold
// settings, split-K and promotion, non-finite inputs included.
#include <catch2/catch.hpp>

#include <limits>
#include <random>
#include <stdexcept>

#include "rpsim/accumulation/gemm.hpp"

namespace {

using rpsim::sim::AccumulationModel;
using rpsim::sim::KernelSchedule;
using rpsim::sim::Matrix;

Matrix random_matrix(Eigen::Index r, Eigen::Index c, const rpsim::Format& f, std::mt19937_64& rng) {
  std::normal_distribution<double> nd(0, 1);
  std::uniform_int_distribution<int> scale(-12, 12);
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = std::ldexp(nd(rng), scale(rng));
  return rpsim::sim::round_to_format(m, f);
}

bool same_bits(const Matrix& x, const Matrix& y) {
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const double u = x.data()[i], v = y.data()[i];
    if (!(std::isnan(u) && std::isnan(v)) && (u != v || std::signbit(u) != std::signbit(v))) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("gemm_fold_group: every schedule's bits as gemm() alone", "[gemm][kernel_schedule]") {
  std::mt19937_64 rng(30);
  const char* bases[] = {"kernel:h100:binary16:binary32:split_k=3", "kernel:h100:bfloat16:binary32:split_k=2",
                         "kernel:h100:e4m3:binary32:wgmma:promotion=2",
                         "kernel:h100:binary16:binary32:split_k=4:k_order=decreasing"};
  const rpsim::sim::Reduction reductions[] = {rpsim::sim::Reduction::sequential,
                                              rpsim::sim::Reduction::reverse, rpsim::sim::Reduction::pairwise,
                                              rpsim::sim::Reduction::exact};
  const rpsim::RoundingMode modes[] = {rpsim::RoundingMode::nearest_even, rpsim::RoundingMode::toward_zero};
  const rpsim::Format outputs[] = {rpsim::formats::binary32(), rpsim::formats::bfloat16(),
                                   rpsim::formats::binary16()};
  int compared = 0;
  for (const char* spec : bases) {
    const auto base = std::get<KernelSchedule>(AccumulationModel::parse(spec).variant());
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<KernelSchedule> group{base};
      for (int g = 0; g < 6; ++g) {
        KernelSchedule s = base;
        s.reduction = reductions[rng() % 4];
        s.reduction_rounding = modes[rng() % 2];
        s.promotion_rounding = modes[rng() % 2];
        s.output = outputs[rng() % 3];
        s.output_rounding = modes[rng() % 2];
        s.reduction_format = rng() % 2 ? rpsim::formats::binary32() : s.output;
        group.push_back(s);
      }
      Matrix a = random_matrix(7, 300, base.stored, rng), b = random_matrix(300, 9, base.stored, rng);
      if (trial == 2) a(1, 5) = std::numeric_limits<double>::infinity();  // the checked chains
      const Matrix c = Matrix::Zero(7, 9);
      const auto got = rpsim::sim::gemm_fold_group(group, a, b, c, rpsim::sim::GemmOptions{2});
      REQUIRE(got.size() == group.size());
      for (std::size_t g = 0; g < group.size(); ++g) {
        INFO(AccumulationModel(group[g]).spec());
        CHECK(same_bits(got[g], rpsim::sim::gemm(AccumulationModel(group[g]), a, b, c)));
        ++compared;
      }
    }
  }
  CHECK(compared == 4 * 3 * 7);
}

TEST_CASE("gemm_fold_group: schedules running other chains are refused by name", "[gemm][kernel_schedule]") {
  const auto s =
      std::get<KernelSchedule>(AccumulationModel::parse("kernel:h100:binary16:binary32").variant());
  KernelSchedule other = s;
  other.split_k = 2;
  const Matrix a = Matrix::Zero(2, 128), b = Matrix::Zero(128, 2), c = Matrix::Zero(2, 2);
  CHECK_THROWS_WITH(rpsim::sim::gemm_fold_group({s, other}, a, b, c),
                    Catch::Contains("split_k=2") && Catch::Contains("runs other chains"));
}
