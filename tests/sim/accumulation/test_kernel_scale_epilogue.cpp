// torch._scaled_mm's per-tensor / per-row scales as a kernel-schedule field
// (kernel_schedule.hpp, scale_epilogue): each order of the binary32 epilogue
// worked out here with float arithmetic, the scales applied before the
// output rounding (one rounding to bf16, not two), the spec round trip and
// the errors naming the field.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/formats/rounding.hpp"

namespace {

using namespace rpsim;
using namespace rpsim::sim;

Matrix random_values(Eigen::Index r, Eigen::Index c, const Format& f, std::mt19937_64& rng) {
  std::normal_distribution<double> nd(0, 1);
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = to_double(f, round_double(f, nd(rng), RoundingMode::nearest_even));
  return m;
}

// Per-row scale_a and per-column scale_b, binary32 values that are not
// powers of two (so every order of the epilogue rounds differently).
GemmScales row_column_scales(Eigen::Index m, Eigen::Index n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.01, 30);
  GemmScales s;
  s.scale_a = Matrix(m, 1);
  s.scale_b = Matrix(1, n);
  for (auto* x : {&*s.scale_a, &*s.scale_b})
    for (Eigen::Index i = 0; i < x->size(); ++i) x->data()[i] = static_cast<float>(u(rng));
  return s;
}

// The epilogue of `how` in float arithmetic on the unscaled binary32 result.
float by_hand(const std::string& how, float sa, float sb, float acc, float c) {
  if (how == "product") return (sa * sb) * acc + c;
  if (how == "a_then_b") return sb * (sa * acc) + c;
  if (how == "b_then_a") return sa * (sb * acc) + c;
  return std::fma(sa * sb, acc, c);  // fused
}

}  // namespace

TEST_CASE("kernel scale epilogue: each order is the binary32 arithmetic it names", "[kernel][scaled-mm]") {
  std::mt19937_64 rng(11);
  const Eigen::Index m = 6, n = 5, k = 384;  // three promotion chunks of 128
  const Matrix a = random_values(m, k, formats::e4m3(), rng), b = random_values(k, n, formats::e4m3(), rng);
  const Matrix c = random_values(m, n, formats::binary32(), rng);
  const GemmScales s = row_column_scales(m, n, rng);
  const std::string base = "kernel:h100:e4m3:fp32:wgmma:promotion=4";
  const Matrix ab = gemm(AccumulationModel::parse(base), a, b);  // the unscaled binary32 result
  Matrix first;
  int differ = 0;
  for (const std::string how : {"product", "a_then_b", "fused", "b_then_a"}) {
    INFO(how);
    const Matrix d = gemm(AccumulationModel::parse(base + ":scale_epilogue=" + how), a, b, c, s);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j)
        CHECK(d(i, j) ==
              static_cast<double>(by_hand(how, float((*s.scale_a)(i, 0)), float((*s.scale_b)(0, j)),
                                          float(ab(i, j)), float(c(i, j)))));
    if (first.size() == 0) first = d;
    differ += (d.array() != first.array()).count();
  }
  // The field is not decoration: the orders give different bits here.
  CHECK(differ > 0);
}

TEST_CASE("kernel scale epilogue: the scales act before the one rounding to the output",
          "[kernel][scaled-mm]") {
  std::mt19937_64 rng(12);
  const Eigen::Index m = 8, n = 8, k = 256;
  const Matrix a = random_values(m, k, formats::e4m3(), rng), b = random_values(k, n, formats::e4m3(), rng);
  const Matrix zero = Matrix::Zero(m, n);
  const GemmScales s = row_column_scales(m, n, rng);
  // The preset for bf16 output against its own fp32-output schedule; per-row
  // scales select its per-row epilogue, B's scale first (kernel_presets.cpp).
  const Matrix ab = gemm(AccumulationModel::parse("cublas:h100:e4m3:fp32"), a, b);
  const Matrix d = gemm(AccumulationModel::parse("cublas:h100:e4m3:bf16"), a, b, zero, s);
  int double_rounding_differs = 0;
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index j = 0; j < n; ++j) {
      const float sa = float((*s.scale_a)(i, 0)), sb = float((*s.scale_b)(0, j));
      const double t = static_cast<double>(sa * (sb * float(ab(i, j))));
      const Format& bf16 = formats::bfloat16();
      CHECK(d(i, j) == to_double(bf16, round_double(bf16, t, RoundingMode::nearest_even)));
      // Scaling a result already rounded to bf16 (the old GEMM-then-scale).
      const double late = to_double(bf16, round_double(bf16, ab(i, j), RoundingMode::nearest_even));
      const double twice =
          to_double(bf16, round_double(bf16, double(sa * (sb * float(late))), RoundingMode::nearest_even));
      double_rounding_differs += twice != d(i, j);
    }
  CHECK(double_rounding_differs > 0);
}

TEST_CASE("kernel scale epilogue: the field's spec, the preset's value and the errors",
          "[kernel][scaled-mm]") {
  const std::string spec = "kernel:h100:e4m3:binary32:wgmma:promotion=4:scale_epilogue=a_then_b";
  CHECK(AccumulationModel::parse(spec).spec() == spec);
  // The default is not printed.
  CHECK(AccumulationModel::parse("kernel:h100:e4m3:fp32:wgmma:scale_epilogue=product").spec() ==
        "kernel:h100:e4m3:binary32:wgmma");
  const KernelPreset p = kernel_preset("cublas:h100", formats::e4m3(), formats::bfloat16(), 0);
  CHECK(p.for_shape(64, 64, 256).scale_epilogue == ScaleEpilogue::product);
  // scales=row: torch._scaled_mm's per-row path (H100 captures, kernel_presets.cpp).
  const auto row = AccumulationModel::parse("cublas:h100:e4m3:bf16:scales=row");
  CHECK(row.spec() == "cublas:h100:e4m3:bfloat16:scales=row");
  CHECK(std::get<KernelPreset>(row.variant()).for_shape(64, 64, 256).scale_epilogue ==
        ScaleEpilogue::b_then_a);
  CHECK(AccumulationModel::parse("cublas:h100:e4m3:bf16:scales=tensor").spec() ==
        "cublas:h100:e4m3:bfloat16");
  CHECK_THROWS_WITH(AccumulationModel::parse("cublas:h100:e4m3:bf16:scales=column"),
                    Catch::Contains("scales=tensor|row"));
  REQUIRE(find_schedule_field("scale_epilogue") != nullptr);
  try {
    AccumulationModel::parse("kernel:h100:e4m3:fp32:wgmma:scale_epilogue=late");
    FAIL("accepted scale_epilogue=late");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("scale_epilogue='late'") != std::string::npos);
    CHECK(what.find("product a_then_b fused b_then_a") != std::string::npos);
  }
  // _scaled_mm scales A*B only: a schedule feeding C into the chain cannot.
  std::mt19937_64 rng(13);
  const Matrix a = random_values(2, 64, formats::e4m3(), rng), b = random_values(64, 2, formats::e4m3(), rng);
  GemmScales s;
  s.scale_a = Matrix::Constant(1, 1, 3.0);
  const auto acc = AccumulationModel::parse("kernel:h100:e4m3:fp32:wgmma:c_placement=accumulator");
  CHECK_THROWS_WITH(gemm(acc, a, b, Matrix::Zero(2, 2), s), Catch::Contains("c_placement=epilogue"));
}
