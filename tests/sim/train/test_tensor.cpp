// train::matmul under sim's accumulation models: sequential:binary32:rne and
// binary64:rne give the models' dot products (on the native kernels), every
// other model is sim::gemm itself, and nothing depends on the thread count.
#include <omp.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "bit_matrices.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/train/tensor.hpp"

using namespace rpsim;
using namespace rpsim::sim::train;
using rpsim::sim::AccumulationModel;

using namespace rpsim::test;

// The native kernels themselves: tests/sim/accumulation/test_native_gemm.cpp.
TEST_CASE("train: matmul under sequential:fp32:rne and sequential:fp64:rne is the models' dot products",
          "[train]") {
  std::uint64_t stream = 0;
  for (const char* spec : {"sequential:fp32:rne", "sequential:fp64:rne"})
    for (const char* operands : {"binary16", "binary32", "binary64"}) {
      const AccumulationModel model = AccumulationModel::parse(spec);
      const Matrix a = random_matrix(format(operands), 65, 300, ++stream, -8, 8);
      const Matrix b = random_matrix(format(operands), 300, 17, ++stream, -8, 8);
      INFO(spec << " on " << operands);
      const Matrix reference = dot_product_gemm(model, a, b);
      CHECK(same_bits(with_1_and_2_threads([&] { return matmul(a, b, model); }), reference));
      const Matrix at = a.transpose(), bt = b.transpose();
      CHECK(same_bits(matmul_tn(at, b, model), reference));
      CHECK(same_bits(matmul_nt(a, bt, model), reference));
    }
}

TEST_CASE("train: sequential low-precision accumulation on binary64 arithmetic equals sim::gemm", "[train]") {
  struct Case {
    const char* spec;
    const char* operands;
    int e_lo, e_hi;
  };
  // [4, 12] sums overflow fp16 (to inf, then inf - inf); e4m3 saturates or
  // gives NaN by its own rules; [-30, 0] reaches fp16 subnormals.
  const Case cases[] = {{"sequential:fp16", "binary16", -6, 6},   {"sequential:fp16", "binary16", -30, 0},
                        {"sequential:fp16", "binary16", 4, 12},   {"sequential:fp16", "binary32", -8, 8},
                        {"sequential:bf16", "bfloat16", -40, 40}, {"sequential:bf16", "binary32", -20, 20},
                        {"sequential:tf32", "binary16", -10, 10}, {"sequential:e5m2", "e5m2", -4, 4},
                        {"sequential:e4m3", "e4m3", -3, 5}};
  std::uint64_t stream = 400;
  for (const Case& c : cases) {
    const AccumulationModel model = AccumulationModel::parse(c.spec);
    const Matrix a = random_matrix(format(c.operands), 19, 150, ++stream, c.e_lo, c.e_hi);
    const Matrix b = random_matrix(format(c.operands), 150, 7, ++stream, c.e_lo, c.e_hi);
    INFO(c.spec << " on " << c.operands << ", exponents " << c.e_lo << ".." << c.e_hi);
    const Matrix fast = with_1_and_2_threads([&] { return matmul(a, b, model); });
    CHECK(same_bits_or_nan(fast, sim::gemm(model, a, b)));
  }
}

TEST_CASE("train: other accumulation models are sim::gemm, Tensor Cores on their input format", "[train]") {
  const Matrix a = random_matrix(formats::binary16(), 70, 96, 200, -5, 5);
  const Matrix b = random_matrix(formats::binary16(), 96, 12, 201, -5, 5);
  for (const char* spec :
       {"sequential:fp16", "fma:fp32", "blocked:32:fp16", "pairwise:bf16", "kahan:fp16",
        "sequential:bf16:sr:seed=5", "exact:fp32", "tc:h100:fp16:fp32", "tc:v100:fp16:fp16",
        "cublas:h100:fp16:fp16", "kernel:h100:fp16:fp32:split_k=2", "eigen:binary64"}) {
    const AccumulationModel model = AccumulationModel::parse(spec);
    INFO(spec);
    const Matrix got = with_1_and_2_threads([&] { return matmul(a, b, model); });
    CHECK(same_bits(got, sim::gemm(model, a, b)));
  }
  // The fp32 accumulator and the Tensor Core model give different sums.
  CHECK_FALSE(same_bits(matmul(a, b, AccumulationModel::parse("sequential:fp32")),
                        matmul(a, b, AccumulationModel::parse("tc:h100:fp16:fp32"))));
  // binary32 operands meet an fp16 Tensor Core model rounded to fp16 first.
  const AccumulationModel tc = AccumulationModel::parse("tc:h100:fp16:fp32");
  const Matrix a32 = random_matrix(formats::binary32(), 20, 48, 202, -3, 3);
  const Matrix b32 = random_matrix(formats::binary32(), 48, 8, 203, -3, 3);
  CHECK(same_bits(matmul(a32, b32, tc),
                  sim::gemm(tc, rounded(formats::binary16(), a32), rounded(formats::binary16(), b32))));
  // A kernel schedule reads its stored format: fp16 cast first; tf32 keeps
  // binary32, which the schedule rounds to tf32 itself (RNE, the cuBLAS preset).
  const AccumulationModel cublas = AccumulationModel::parse("cublas:h100:fp16:fp32");
  CHECK(same_bits(matmul(a32, b32, cublas),
                  sim::gemm(cublas, rounded(formats::binary16(), a32), rounded(formats::binary16(), b32))));
  const AccumulationModel tf32 = AccumulationModel::parse("cublas:h100:tf32:fp32");
  CHECK(same_bits(matmul(a32, b32, tf32), sim::gemm(tf32, a32, b32)));
  // At a measured shape (64x64x256: split-K 8) the schedule is not the bare
  // instruction's one chain.
  const Matrix a64 = random_matrix(formats::binary32(), 64, 256, 204, -3, 3);
  const Matrix b64 = random_matrix(formats::binary32(), 256, 64, 205, -3, 3);
  CHECK_FALSE(
      same_bits(matmul(a64, b64, tf32), matmul(a64, b64, AccumulationModel::parse("tc:h100:tf32:fp32"))));
}

TEST_CASE("train: stochastic accumulation draws per matmul from the random stream", "[train]") {
  const Matrix a = random_matrix(formats::bfloat16(), 8, 200, 300, -3, 3);
  const Matrix b = random_matrix(formats::bfloat16(), 200, 8, 301, -3, 3);
  const AccumulationModel sr = AccumulationModel::parse("sequential:bf16:sr:seed=1");
  const Matrix s1 = matmul(a, b, sr, RandomStream{3, 1});
  CHECK(same_bits(s1, matmul(a, b, sr, RandomStream{3, 1})));  // deterministic
  CHECK_FALSE(same_bits(s1, matmul(a, b, sr, RandomStream{3, 2})));
  CHECK_FALSE(same_bits(s1, matmul(a, b, sr)));
  // Deterministic models ignore the stream.
  const AccumulationModel rne = AccumulationModel::parse("sequential:bf16");
  CHECK(same_bits(matmul(a, b, rne, RandomStream{3, 1}), matmul(a, b, rne)));
}

TEST_CASE("train: matmul_tn and matmul_nt equal matmul of the transposed operand bit for bit", "[train]") {
  // The native paths read the transposed operand in place (their packing);
  // the others are given the transpose. Odd shapes leave partial micro-tiles
  // and panels; binary64 operands under fp32 take sim::gemm.
  std::uint64_t stream = 300;
  for (const char* spec : {"sequential:fp32:rne", "sequential:fp64:rne", "sequential:bf16", "pairwise:fp32"})
    for (const char* fmt : {"binary16", "binary64"})
      for (const auto& [m, k, n] : {std::tuple{7, 33, 5}, std::tuple{65, 300, 37}, std::tuple{1, 1, 1}}) {
        const AccumulationModel model = AccumulationModel::parse(spec);
        const Matrix at = random_matrix(format(fmt), k, m, ++stream, -6, 6);  // A^T
        const Matrix b = random_matrix(format(fmt), k, n, ++stream, -6, 6);
        const Matrix bt = random_matrix(format(fmt), n, k, ++stream, -6, 6);  // B^T
        const Matrix a = random_matrix(format(fmt), m, k, ++stream, -6, 6);
        INFO(spec << ", " << fmt << " operands, " << m << "x" << k << "x" << n);
        const Matrix tn = with_1_and_2_threads([&] { return matmul_tn(at, b, model); });
        const Matrix nt = with_1_and_2_threads([&] { return matmul_nt(a, bt, model); });
        CHECK(same_bits(tn, matmul(Matrix(at.transpose()), b, model)));
        CHECK(same_bits(nt, matmul(a, Matrix(bt.transpose()), model)));
      }
  const AccumulationModel fp32 = AccumulationModel::parse("sequential:fp32:rne");
  CHECK_THROWS_AS(matmul_tn(Matrix(3, 4), Matrix(4, 2), fp32), std::invalid_argument);
  CHECK_THROWS_AS(matmul_nt(Matrix(3, 4), Matrix(2, 3), fp32), std::invalid_argument);
}

TEST_CASE("train: short_format holds the formats whose products are exact in binary32", "[train]") {
  // At most 12 significant bits and magnitudes in [2^-62, 2^63): every
  // product of two values is then a normal binary32 number or zero.
  for (const char* name : {"binary16", "e4m3", "e5m2"}) CHECK(short_format(parse_format(name)));
  // bfloat16's range, binary32's and e8m12's significands, fixed point.
  for (const char* name : {"bfloat16", "binary32", "e8m12", "e8m11", "q16.14"})
    CHECK_FALSE(short_format(parse_format(name)));
}
