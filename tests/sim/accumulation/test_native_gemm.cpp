// The native kernels (native_gemm.hpp) and sim::gemm's use of them: for
// sequential:binary32:rne and sequential:binary64:rne from a +0 C, the bits
// of the model's own dot product, element by element, at any thread count;
// any other C, and binary32 operands that are not binary32 values, take the
// dot product itself.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "bit_matrices.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/native_gemm.hpp"

using namespace rpsim;
using namespace rpsim::test;
using rpsim::sim::AccumulationModel;
namespace native = rpsim::sim::native;

namespace {
// Operands of two formats with entries of exponents in [e_lo, e_hi].
struct Case {
  const char* a_format;
  const char* b_format;
  int e_lo, e_hi;
};
}  // namespace

TEST_CASE("accumulation: native binary32 GEMM equals sequential:fp32:rne's dot products bit for bit",
          "[accumulation]") {
  const AccumulationModel fp32 = AccumulationModel::parse("sequential:fp32:rne");
  // No sum overflows binary32. Wide ranges give long alignment shifts; [-70,
  // 0] products reach the binary32 subnormals.
  const Case cases[] = {{"binary16", "binary16", -6, 6},  {"bfloat16", "bfloat16", -40, 40},
                        {"binary32", "binary32", -3, 3},  {"binary32", "binary32", -70, 0},
                        {"binary32", "binary32", 0, 60},  {"e4m3", "e5m2", -5, 5},
                        {"binary16", "binary32", -12, 12}};
  std::uint64_t stream = 0;
  for (const Case& c : cases)
    // (300, 20, 9) and (200, 8, 70) are tiled as C^T = B^T A^T where A is not
    // given transposed (a narrow C; a short K): the same bits.
    for (const auto& [m, k, n] : {std::tuple{7, 33, 5}, std::tuple{65, 300, 17}, std::tuple{1, 1, 1},
                                  std::tuple{300, 20, 9}, std::tuple{200, 8, 70}}) {
      const BitMatrix a = random_matrix(format(c.a_format), m, k, ++stream, c.e_lo, c.e_hi);
      const BitMatrix b = random_matrix(format(c.b_format), k, n, ++stream, c.e_lo, c.e_hi);
      INFO(c.a_format << " x " << c.b_format << " exponents " << c.e_lo << ".." << c.e_hi << ", " << m << "x"
                      << k << "x" << n);
      const BitMatrix reference = dot_product_gemm(fp32, a, b);
      CHECK(same_bits(with_1_and_2_threads([&] { return sim::gemm(fp32, a, b); }), reference));
      // The transposed readers (the trainer's backward products).
      const BitMatrix at = a.transpose(), bt = b.transpose();
      CHECK(same_bits(*native::matmul_binary32(at, b, native::Transposed::a), reference));
      CHECK(same_bits(*native::matmul_binary32(a, bt, native::Transposed::b), reference));
      CHECK(same_bits(*native::matmul_binary32(a, b, native::Transposed::none, 1), reference));
      // Operands the caller vouches for (values of binary16, e4m3, e5m2: the
      // trainer's casts): no scan, the same bits.
      if (std::string(c.a_format) != "bfloat16" && std::string(c.a_format) != "binary32" &&
          std::string(c.b_format) != "binary32") {
        CHECK(same_bits(*native::matmul_binary32(a, b, native::Transposed::none, 0, true), reference));
        CHECK(same_bits(*native::matmul_binary32(at, b, native::Transposed::a, 0, true), reference));
        CHECK(same_bits(*native::matmul_binary32(a, bt, native::Transposed::b, 0, true), reference));
      }
    }
  // Operands that are not binary32 values would be rounded by the float
  // kernel: the kernel declines them and sim::gemm takes the dot products,
  // which round only the products.
  const BitMatrix a = random_matrix(formats::binary64(), 9, 40, 100, -4, 4);
  const BitMatrix b = random_matrix(formats::binary64(), 40, 6, 101, -4, 4);
  CHECK_FALSE(native::matmul_binary32(a, b).has_value());
  CHECK(same_bits(sim::gemm(fp32, a, b), dot_product_gemm(fp32, a, b)));
  // One inexact entry anywhere declines every reader, transposed or not
  // (the packings check in vector runs; the last, short block of rows and
  // panel of columns included), while a NaN converts and is kept.
  const BitMatrix a32 = random_matrix(formats::binary32(), 9, 40, 102, -4, 4);
  const BitMatrix b32 = random_matrix(formats::binary32(), 40, 6, 103, -4, 4);
  for (const auto& [i, j] : {std::pair{0, 0}, std::pair{8, 39}, std::pair{4, 17}}) {
    BitMatrix ai = a32;
    ai(i, j) = 1.0 + 0x1p-40;  // not a binary32 value
    BitMatrix bi = b32;
    bi(j, i % 6) = 1.0 + 0x1p-40;
    INFO("inexact entry at " << i << ", " << j);
    CHECK_FALSE(native::matmul_binary32(ai, b32).has_value());
    CHECK_FALSE(native::matmul_binary32(BitMatrix(ai.transpose()), b32, native::Transposed::a).has_value());
    CHECK_FALSE(native::matmul_binary32(a32, bi).has_value());
    CHECK_FALSE(native::matmul_binary32(a32, BitMatrix(bi.transpose()), native::Transposed::b).has_value());
  }
  // Empty sides: nothing is read, the product is m x n of +0 (k = 0) or empty.
  for (const auto& [m, k, n] : {std::tuple{0, 3, 2}, std::tuple{2, 0, 3}, std::tuple{2, 3, 0}}) {
    const BitMatrix ae = BitMatrix::Zero(m, k), be = BitMatrix::Zero(k, n);
    for (const auto& d : {native::matmul_binary32(ae, be),
                          native::matmul_binary32(BitMatrix(ae.transpose()), be, native::Transposed::a),
                          native::matmul_binary32(ae, BitMatrix(be.transpose()), native::Transposed::b)}) {
      REQUIRE(d.has_value());
      CHECK(d->rows() == m);
      CHECK(d->cols() == n);
      CHECK((d->array() == 0.0).all());
    }
  }
  BitMatrix an = a32;
  an(8, 39) = std::numeric_limits<double>::quiet_NaN();
  const auto with_nan = native::matmul_binary32(BitMatrix(an.transpose()), b32, native::Transposed::a);
  REQUIRE(with_nan.has_value());
  CHECK(std::isnan((*with_nan)(8, 0)));
}

TEST_CASE("accumulation: native binary32 GEMM's fused tiles keep the bits at the edges of exact products",
          "[accumulation]") {
  const AccumulationModel fp32 = AccumulationModel::parse("sequential:fp32:rne");
  std::uint64_t stream = 400;
  // The fused tiles (one FMA per term) are taken only where every product
  // is exact in binary32: factors of at most 12 significant bits in [2^-62,
  // 2^63). At the edges: binary16 down to its subnormals and bfloat16 just
  // inside take them; bfloat16 just outside, whose products fall below
  // binary32's normals (rounded by the multiplication, not by an FMA) or
  // overflow it, must not: any wrong choice shows in the bits (overflows
  // make infinities, and inf - inf a NaN, hence same_bits_or_nan). So must
  // significands just wider than 12 bits.
  const Case edges[] = {{"binary16", "binary16", -24, 15}, {"bfloat16", "bfloat16", -62, -50},
                        {"bfloat16", "bfloat16", 50, 62},  {"bfloat16", "bfloat16", -75, -63},
                        {"bfloat16", "bfloat16", 63, 66},  {"e4m3", "bfloat16", -70, -40},
                        {"e8m11", "e8m11", -20, 20},   // 12 significant bits: inside
                        {"e8m12", "e8m11", -20, 20}};  // 13: a product may round
  for (const Case& c : edges)
    for (const auto& [m, k, n] : {std::tuple{7, 33, 5}, std::tuple{65, 300, 17}, std::tuple{300, 20, 9}}) {
      const BitMatrix a = random_matrix(format(c.a_format), m, k, ++stream, c.e_lo, c.e_hi);
      const BitMatrix b = random_matrix(format(c.b_format), k, n, ++stream, c.e_lo, c.e_hi);
      INFO(c.a_format << " x " << c.b_format << " exponents " << c.e_lo << ".." << c.e_hi << ", " << m << "x"
                      << k << "x" << n);
      const BitMatrix reference = dot_product_gemm(fp32, a, b);
      CHECK(same_bits_or_nan(*native::matmul_binary32(a, b), reference));
      CHECK(same_bits_or_nan(*native::matmul_binary32(BitMatrix(a.transpose()), b, native::Transposed::a),
                             reference));
      CHECK(same_bits_or_nan(*native::matmul_binary32(a, BitMatrix(b.transpose()), native::Transposed::b),
                             reference));
    }
  // Operands vouched for (binary16 casts, not scanned: fused tiles) across
  // binary16's range, with infinities and a NaN among them, which the scan
  // sends to the unfused tiles: the same bits, NaN where they have one (an
  // infinite product is exact either way).
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [m, k, n] : {std::tuple{7, 33, 5}, std::tuple{65, 300, 17}, std::tuple{300, 20, 9}}) {
    BitMatrix a = random_matrix(format("binary16"), m, k, ++stream, -24, 15);
    BitMatrix b = random_matrix(format("binary16"), k, n, ++stream, -24, 15);
    a(0, 0) = inf;
    a(m - 1, 1) = -inf;
    b(2, n - 1) = std::numeric_limits<double>::quiet_NaN();
    CHECK(same_bits_or_nan(*native::matmul_binary32(a, b, native::Transposed::none, 0, true),
                           *native::matmul_binary32(a, b)));
  }
}

TEST_CASE("accumulation: native binary64 GEMM (the FP64 shadow's) equals sequential:fp64:rne's dot products",
          "[accumulation]") {
  const AccumulationModel fp64 = AccumulationModel::parse("sequential:fp64:rne");
  // Any binary64 operands: wide exponents give long alignment shifts, [-540,
  // 0] products reach the binary64 subnormals, [400, 520] sums overflow to
  // infinity (and inf - inf to NaN, whose bits the model does not fix).
  struct Case {
    int e_lo, e_hi;
  };
  std::uint64_t stream = 200;
  for (const Case c : {Case{-3, 3}, Case{-200, 200}, Case{-540, 0}, Case{400, 520}})
    for (const auto& [m, k, n] :
         {std::tuple{7, 33, 5}, std::tuple{65, 300, 37}, std::tuple{1, 1, 1}, std::tuple{300, 20, 9}}) {
      const BitMatrix a = random_matrix(formats::binary64(), m, k, ++stream, c.e_lo, c.e_hi);
      const BitMatrix b = random_matrix(formats::binary64(), k, n, ++stream, c.e_lo, c.e_hi);
      INFO("exponents " << c.e_lo << ".." << c.e_hi << ", " << m << "x" << k << "x" << n);
      const BitMatrix reference = dot_product_gemm(fp64, a, b);
      CHECK(same_bits_or_nan(with_1_and_2_threads([&] { return sim::gemm(fp64, a, b); }), reference));
      const BitMatrix at = a.transpose();
      CHECK(same_bits_or_nan(native::matmul_binary64(at, b, native::Transposed::a), reference));
    }
}

// The packing buffers are kept between calls and never shrunk: a smaller
// product after a larger one must not read what the larger one left in them
// (NaNs here), in its short last block of A or panel of B.
TEST_CASE("accumulation: native GEMMs read nothing a larger call left in their packing buffers",
          "[accumulation]") {
  for (const char* spec : {"sequential:fp32:rne", "sequential:fp64:rne"}) {
    INFO(spec);
    const AccumulationModel model = AccumulationModel::parse(spec);
    const BitMatrix big = BitMatrix::Constant(41, 57, std::numeric_limits<double>::quiet_NaN());
    CHECK(sim::gemm(model, big, big.transpose()).array().isNaN().all());
    const BitMatrix a = random_matrix(formats::binary16(), 5, 3, 901, -3, 3),
                    b = random_matrix(formats::binary16(), 3, 6, 902, -3, 3);
    CHECK(same_bits_or_nan(sim::gemm(model, a, b), dot_product_gemm(model, a, b)));
    CHECK_FALSE(sim::gemm(model, a, b).array().isNaN().any());
  }
}

// The kernels start each chain at +0. A C of -0 entries does not: a chain of
// -0 products stays -0 from it, and is +0 from the kernels' start.
TEST_CASE("accumulation: sim::gemm takes the native kernels only from a C of +0", "[accumulation]") {
  for (const char* spec : {"sequential:fp32:rne", "sequential:fp64:rne"}) {
    INFO(spec);
    const AccumulationModel model = AccumulationModel::parse(spec);
    BitMatrix a(2, 3), b(3, 2);
    a << -1, -2, -0.5, 1, 2, 4;
    b << 0, 1, 0, -1, 0, 0.25;  // column 0: every product of row 0 is -0
    const BitMatrix plus_zero = BitMatrix::Zero(2, 2);
    const BitMatrix minus_zero = -plus_zero;
    const BitMatrix from_plus = sim::gemm(model, a, b, plus_zero);
    const BitMatrix from_minus = sim::gemm(model, a, b, minus_zero);
    CHECK(same_bits(from_plus, dot_product_gemm(model, a, b, plus_zero)));
    CHECK(same_bits(from_minus, dot_product_gemm(model, a, b, minus_zero)));
    CHECK_FALSE(std::signbit(from_plus(0, 0)));
    CHECK(std::signbit(from_minus(0, 0)));  // the case that tells them apart
    // Any other C enters each chain first.
    const BitMatrix c = random_matrix(formats::binary32(), 2, 2, 300, -3, 3);
    CHECK(same_bits(sim::gemm(model, a, b, c), dot_product_gemm(model, a, b, c)));
  }
}

// scan_binary32 against its definition applied to one value at a time (the
// float round trip, the 12-bit and exponent-range rule, isnan), each special
// value at every position of runs of 1 to 19 (the vector loops' tails).
TEST_CASE("accumulation: scan_binary32 finds each kind of value wherever it lies", "[accumulation]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const double specials[] = {nan,    -inf, 0.1, 1.0 + 0x1p-12, 0x1p-63,
                             0x1p63, -0.0, 3.0, 0x1p-62,       1.0 + 0x1p-11};
  auto expected = [](double v) {
    const float f = float(v);
    const bool binary32 = std::isnan(v) || double(f) == v;
    int m = 0;
    const bool in_range = std::fabs(v) >= 0x1p-62 && std::fabs(v) < 0x1p63;
    const bool short12 = binary32 && std::isfinite(v) && double(float(v)) == v &&
                         std::ldexp(std::frexp(v, &m), 12) == std::trunc(std::ldexp(std::frexp(v, &m), 12));
    return (binary32 ? 0 : native::kNotBinary32) | (v == 0 || (short12 && in_range) ? 0 : native::kNotShort) |
           (std::isnan(v) ? native::kNaN : 0);
  };
  for (int n = 1; n <= 19; ++n)
    for (int at = 0; at < n; ++at)
      for (double s : specials) {
        std::vector<double> x(std::size_t(n), 1.5);
        x[std::size_t(at)] = s;
        INFO("n " << n << " at " << at << " value " << s);
        CHECK(native::scan_binary32(x.data(), n) == expected(s));
      }
  const std::vector<double> plain(7, -2.25);
  CHECK(native::scan_binary32(plain.data(), 7) == 0);
}
