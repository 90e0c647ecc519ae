// The GEMM library's epilogue: dequantisation before the bias, the bias cast
// to its format, the accumulation and output roundings, in that order.
#include <catch2/catch.hpp>

#include "rpsim/accumulation/gemm_epilogue.hpp"
#include "rpsim/formats/rounding.hpp"

using namespace rpsim;

namespace {

double r(const Format& f, double x) {
  return to_double(f, round_double(f, x, RoundingMode::nearest_even));
}

}  // namespace

TEST_CASE("accumulation: the epilogue dequantises, adds the cast bias, rounds to the output",
          "[accumulation]") {
  sim::Matrix acc(2, 2);
  acc << 1000.0, -3.0, 0.125, 7.0;
  sim::Matrix bias(1, 2);
  bias << 0.1, -0.3;
  sim::GemmEpilogue e;
  e.alpha = sim::dequantisation_factor(3.0, 7.0);
  e.bias = &bias;
  e.bias_format = &formats::binary16();
  e.output = &formats::bfloat16();
  sim::Matrix before;
  sim::Matrix out = acc;
  sim::apply_epilogue(e, formats::binary32(), out, &before);
  const double inv = double(float(1.0 / 21.0));
  CHECK(e.alpha == inv);
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 2; ++j) {
      // The bias is not dequantised: it is added after step 1.
      const double expect_acc = r(
          formats::binary32(), r(formats::binary32(), acc(i, j) * inv) + r(formats::binary16(), bias(0, j)));
      CHECK(before(i, j) == expect_acc);
      CHECK(out(i, j) == r(formats::bfloat16(), expect_acc));
    }
}

TEST_CASE("accumulation: an epilogue with nothing to do leaves the accumulator", "[accumulation]") {
  sim::Matrix acc(1, 3);
  acc << 1.0, -0.0, 3.5;
  sim::Matrix out = acc;
  sim::apply_epilogue(sim::GemmEpilogue{}, formats::binary32(), out);
  CHECK(out == acc);
  CHECK(std::signbit(out(0, 1)));
}

TEST_CASE("accumulation: NVFP4's alpha is TE's: fl32(fl32(amax_a amax_b) / fl32(36 E E))", "[accumulation]") {
  // 3 * 5 / (36 * 448 * 448) is not a binary32 value: one rounding of the
  // product (exact here), one of the quotient.
  CHECK(sim::nvfp4_alpha(3.0, 5.0) == double(15.0f / 7225344.0f));
  const double a = 1.2345678, b = 98.7654321;  // a product that rounds in binary32
  CHECK(sim::nvfp4_alpha(a, b, 448, 256) == double(float(float(a) * float(b)) / float(36.0 * 448 * 256)));
  CHECK(sim::nvfp4_alpha(a, b) != double(float(1.0 / ((2688.0 / a) * (2688.0 / b)))));
}
