// FP8 block scaling's GEMM (gemm.hpp gemm_blockwise) against the fold of TE's
// cuBLAS blockwise-GEMM reference written out: per 128-long k tile the
// product from zero, then one fused multiply-add with the tile's scales in
// the order the operands' 1-D / 2-D scaling gives; C added after the
// conversion to the output format.
#include <catch2/catch.hpp>

#include <cmath>

#include "rpsim/accumulation/gemm.hpp"

using namespace rpsim;
using namespace rpsim::sim;

namespace {

// E4M3 values (small integers and halves), K = 256: two tiles.
Matrix elements(Eigen::Index r, Eigen::Index c, int salt) {
  Matrix m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = double((i * 7 + j * 3 + salt) % 9 - 4) * 0.5;
  return m;
}

const AccumulationModel kFp32 = AccumulationModel::parse("sequential:fp32:rne");

}  // namespace

TEST_CASE("gemm_blockwise: fma(fl32(P * sa), sb, y) per k tile, 2Dx1D scales B first, 2Dx2D one product",
          "[accumulation]") {
  const Matrix a = elements(2, 256, 1), b = elements(256, 3, 2);
  BlockwiseScales s;
  s.sa = Matrix(2, 2);
  s.sb = Matrix(2, 3);
  // Scales whose products round: 1/3 and 1/7 in binary32, and 3.
  s.sa << double(1.0f / 3), double(1.0f / 7), 3.0, double(1.0f / 3);
  s.sb << double(1.0f / 7), 3.0, double(1.0f / 3), 3.0, double(1.0f / 7), 5.0;
  for (const auto& [a2, b2] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
    s.a_2d = a2;
    s.b_2d = b2;
    const Matrix d = gemm_blockwise(kFp32, a, b, s, formats::binary32());
    for (Eigen::Index i = 0; i < 2; ++i)
      for (Eigen::Index j = 0; j < 3; ++j) {
        float y = 0.0f;
        for (int t = 0; t < 2; ++t) {
          float p = 0.0f;
          for (int k = 128 * t; k < 128 * t + 128; ++k) p += float(a(i, k)) * float(b(k, j));
          const float sa = float(s.sa(i, t)), sb = float(s.sb(t, j));
          y = a2 && b2 ? std::fma(p, sa * sb, y) : a2 ? std::fma(p * sb, sa, y) : std::fma(p * sa, sb, y);
        }
        INFO("a_2d " << a2 << " b_2d " << b2 << " at " << i << "," << j);
        CHECK(d(i, j) == double(y));
      }
  }
  // The orders differ: P = 3 * 7 = 21, sa = fl(1/3), sb = fl(1/7): A first
  // fl(21 sa) = 7, fma(7, sb, 0) = 1; B first fl(21 sb) = 3 + 2^-22,
  // fma(that, sa, 0) = 1 + 2^-23.
  Matrix a1 = Matrix::Zero(1, 128), b1 = Matrix::Zero(128, 1);
  a1(0, 0) = 3;
  b1(0, 0) = 7;
  BlockwiseScales one;
  one.sa = Matrix::Constant(1, 1, double(1.0f / 3));
  one.sb = Matrix::Constant(1, 1, double(1.0f / 7));
  CHECK(gemm_blockwise(kFp32, a1, b1, one, formats::binary32())(0, 0) == 1.0);
  one.a_2d = true;
  CHECK(gemm_blockwise(kFp32, a1, b1, one, formats::binary32())(0, 0) == 1.0 + std::ldexp(1.0, -23));
}

TEST_CASE("gemm_blockwise: C joins after the conversion to the output format, shapes are checked",
          "[accumulation]") {
  const Matrix a = Matrix::Constant(1, 128, 1.0), b = Matrix::Constant(128, 1, 1.0);
  BlockwiseScales s;
  s.sa = Matrix::Constant(1, 1, 1.0);
  s.sb = Matrix::Constant(
      1, 1, double(1.0f + std::ldexp(1.0f, -10)) / 128);  // y = 1 + 2^-10 - a bf16 tie's neighbour
  const Matrix c = Matrix::Constant(1, 1, std::ldexp(1.0, -8));
  const Matrix d = gemm_blockwise(kFp32, a, b, s, formats::bfloat16(), &c);
  // bf16(y) = 1 (2^-10 is below half of bf16's 2^-7 step), then 1 + 2^-8 in
  // binary32 is a bf16 tie: to even, 1. Adding C before the conversion would
  // give 1 + 2^-8 + 2^-10 -> 1 + 2^-7.
  CHECK(d(0, 0) == 1.0);
  s.sa = Matrix::Constant(1, 2, 1.0);
  CHECK_THROWS_WITH(gemm_blockwise(kFp32, a, b, s, formats::binary32()),
                    Catch::Contains("SA is 1x2, expected 1x1"));
}
