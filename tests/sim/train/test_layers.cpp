// Layer derivatives against central finite differences in binary64, and the
// rounding fast paths against the exact core (matmul: test_train_tensor.cpp).
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "finite_differences.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/train/layers.hpp"
#include "rpsim/train/layers/block_gemm.hpp"
#include "rpsim/train/policy.hpp"

using namespace rpsim;
using namespace rpsim::sim::train;
using namespace rpsim::sim::train::testing;

TEST_CASE("train: Linear gradients match finite differences", "[train]") {
  Linear l("fc", 5, 3);
  l.weight.value = random_matrix(5, 3, 1);
  l.bias.value = random_matrix(1, 3, 2);
  check_layer(l, random_matrix(4, 5, 3));
}

TEST_CASE("train: ReLU and GELU gradients match finite differences", "[train]") {
  ReLU relu("relu");
  Matrix x = random_matrix(3, 6, 4);
  for (Eigen::Index i = 0; i < x.size(); ++i)
    if (std::fabs(x.data()[i]) < 1e-3) x.data()[i] = 0.5;  // away from the kink
  check_layer(relu, x);
  GELU gelu("gelu");
  check_layer(gelu, random_matrix(3, 6, 5, 3.0));
}

TEST_CASE("train: LayerNorm gradients match finite differences", "[train]") {
  LayerNorm ln("ln", 6);
  ln.gamma.value = random_matrix(1, 6, 6);
  ln.beta.value = random_matrix(1, 6, 7);
  check_layer(ln, random_matrix(3, 6, 8, 2.0));
}

TEST_CASE("train: Conv2d and MaxPool2d gradients match finite differences", "[train]") {
  Conv2d conv("conv", 2, 3, 5, 5, 3, 1);
  conv.weight.value = random_matrix(2 * 9, 3, 9);
  conv.bias.value = random_matrix(1, 3, 10);
  check_layer(conv, random_matrix(2, 2 * 25, 11));
  MaxPool2d pool("pool", 2, 4, 4, 2);
  check_layer(pool, random_matrix(2, 2 * 16, 12));  // distinct values: no ties
}

TEST_CASE("train: cross-entropy and MSE gradients match finite differences", "[train]") {
  const PrecisionPolicy fp64 = named_policy("fp64");
  const StepContext ctx{&fp64, 0, 0};
  const Matrix z0 = random_matrix(4, 5, 13, 3.0);
  const std::vector<int> labels{0, 3, 4, 1};
  CrossEntropyLoss ce;
  MSELoss mse;
  for (Loss* loss : std::vector<Loss*>{&ce, &mse}) {
    loss->forward(Tensor{z0, &formats::binary64()}, labels, ctx);
    const Tensor d = loss->backward(8.0, ctx);  // scaled by 8
    Matrix z = z0;
    for (Eigen::Index i = 0; i < z.size(); ++i) {
      const double keep = z.data()[i];
      z.data()[i] = keep + 1e-6;
      const double up = loss->forward(Tensor{z, &formats::binary64()}, labels, ctx);
      z.data()[i] = keep - 1e-6;
      const double down = loss->forward(Tensor{z, &formats::binary64()}, labels, ctx);
      z.data()[i] = keep;
      INFO(loss->op() << " logit " << i);
      CHECK(d.values.data()[i] == Approx(8.0 * (up - down) / 2e-6).margin(1e-6));
    }
  }
}

TEST_CASE("train: fast rounding equals the exact core", "[train]") {
  for (const char* name : {"binary32", "binary16", "bfloat16", "tf32", "e5m2", "e4m3", "e3m2", "e2m1"}) {
    const Format& f = format(name);
    for (std::uint64_t i = 0; i < 20000; ++i) {
      const std::uint64_t r = counter_random(1, 2, i);
      // Magnitudes from far below the subnormals to beyond the largest value.
      const double mag = std::ldexp(double(r >> 11) * 0x1.0p-53 + 0.5, int(r % 80) - 60 + f.emax / 2);
      const double x = (r & 1) ? -mag : mag;
      const double expect = to_double(f, round_double(f, x));
      const double got = round_value(f, x);
      INFO(name << " x=" << x);
      if (std::isnan(expect))
        REQUIRE(std::isnan(got));
      else
        REQUIRE(std::bit_cast<std::uint64_t>(got) == std::bit_cast<std::uint64_t>(expect));
    }
    // Ties round to even.
    const double tie = f.min_positive() * 2.5;
    CHECK(round_value(f, tie) == f.min_positive() * 2);
  }
}

TEST_CASE("train: Linear under fp32 equals a native float computation", "[train]") {
  const PrecisionPolicy fp32 = named_policy("fp32");
  const StepContext ctx{&fp32, 0, 0};
  Linear l("fc", 40, 6);
  l.weight.value = rounded(formats::binary32(), random_matrix(40, 6, 30));
  l.bias.value = rounded(formats::binary32(), random_matrix(1, 6, 31));
  const Matrix x = rounded(formats::binary32(), random_matrix(3, 40, 32));
  const Tensor y = l.forward(Tensor{x, &formats::binary32()}, ctx);
  for (Eigen::Index i = 0; i < 3; ++i)
    for (Eigen::Index j = 0; j < 6; ++j) {
      float acc = 0.0f;
      for (Eigen::Index p = 0; p < 40; ++p) acc += float(x(i, p)) * float(l.weight.value(p, j));
      acc += float(l.bias.value(0, j));
      REQUIRE(y.values(i, j) == double(acc));
    }
}

TEST_CASE("train: FP8 scaling helpers", "[train]") {
  Fp8Recipe delayed;
  delayed.scaling = Fp8Scaling::delayed;
  delayed.amax_history_len = 2;
  Fp8ScaleState h;
  const Format& e4m3 = formats::e4m3();
  Matrix a = Matrix::Constant(2, 2, 2.0);
  // Transformer Engine starts every tensor at scale 1 (history zeros).
  CHECK(fp8_scale(a, e4m3, delayed, h) == 1.0);
  Matrix b = Matrix::Constant(2, 2, 8.0);
  // Delayed: the scale uses the history (amax 2: 448 / 2), not this tensor's 8.
  CHECK(fp8_scale(b, e4m3, delayed, h) == 224.0);
  CHECK(fp8_scale(a, e4m3, delayed, h) == 56.0);   // max over the history {2, 8}
  CHECK(fp8_scale(a, e4m3, delayed, h) == 56.0);   // {8, 2}: the window holds 2 amaxes
  CHECK(fp8_scale(a, e4m3, delayed, h) == 224.0);  // {2, 2}: 8 has left the window
  // A step whose amax is zero keeps the previous scale (TE's kernel_bulk
  // neither rolls nor recomputes), where the old rule reset it to 1.
  const Matrix zero = Matrix::Zero(2, 2);
  CHECK(fp8_scale(zero, e4m3, delayed, h) == 224.0);
  CHECK(fp8_scale(a, e4m3, delayed, h) == 224.0);
  // An infinite amax (an overflowed tensor) keeps the previous scale while it
  // is in the window (TE: torch.where(isfinite(amax), sf, scale)), not 1.
  Matrix inf = a;
  inf(0, 1) = std::numeric_limits<double>::infinity();
  CHECK(fp8_scale(inf, e4m3, delayed, h) == 224.0);
  CHECK(fp8_scale(a, e4m3, delayed, h) == 224.0);  // the history holds inf: kept
  CHECK(fp8_scale(a, e4m3, delayed, h) == 224.0);  // kept again by the update over {2, inf}
  CHECK(fp8_scale(b, e4m3, delayed, h) == 224.0);  // {2, 2} again
  CHECK(fp8_scale(a, e4m3, delayed, h) == 56.0);   // {2, 8}
  // A NaN element is skipped by the amax, as TE's fmaxf reduction does.
  Fp8ScaleState fresh;
  Matrix with_nan = b;
  with_nan(1, 1) = std::numeric_limits<double>::quiet_NaN();
  fp8_scale(with_nan, e4m3, delayed, fresh);
  CHECK(fp8_scale(a, e4m3, delayed, fresh) == 56.0);
  // Current scaling: this tensor's amax; 1 when it is zero or infinite.
  Fp8Recipe current;
  current.scaling = Fp8Scaling::current;
  Fp8ScaleState unused;
  CHECK(fp8_scale(b, e4m3, current, unused) == 56.0);
  CHECK(fp8_scale(zero, e4m3, current, unused) == 1.0);
  CHECK(fp8_scale(inf, e4m3, current, unused) == 1.0);
  const Matrix q = fp8_quantize(b, e4m3, 224.0);  // 8 * 224 = 1792 saturates to 448
  CHECK(q(0, 0) == 448.0);
  // MX: a block's shared scale is 2^(floor(log2 amax) - emax).
  Matrix m(1, 4);
  m << 1.0, 0.3, -100.0, 1e-9;
  Fp8Recipe mx;
  mx.scaling = Fp8Scaling::mx;
  mx.block_size = 32;
  const Matrix d = block_quantize_recipe(m, e4m3, mx, {1});
  CHECK(d(0, 2) == -96.0);  // scale 2^(6-8); -400 rounds to -384 in e4m3 -> -96
  CHECK(d(0, 3) == 0.0);    // far below the block's range
}

TEST_CASE("train: underflow is counted where a gradient is rounded to its format", "[train]") {
  // fp16-pure: the linear op outputs fp16, gradients are stored in fp16, the
  // matmuls accumulate in fp32. Gradients of about 2^-24 * 0.05 are nonzero in
  // fp32 and flush to zero in fp16.
  const PrecisionPolicy pure = named_policy("fp16-pure");
  const StepContext ctx{&pure, 0, 0};
  Linear l("fc", 24, 5);
  l.weight.value = rounded(formats::binary16(), random_matrix(24, 5, 40, 0.05));
  const Matrix x = rounded(formats::binary16(), random_matrix(6, 24, 41));
  l.forward(Tensor{x, &formats::binary16()}, ctx);
  Matrix dy = random_matrix(6, 5, 42, 0x1.0p-14);
  dy.row(0) *= 0x1.0p-10;  // one sample's and one output's gradients at the
  dy.col(0) *= 0x1.0p-10;  // bottom of fp16: dx's row 0 and dw's column 0 flush
  round_in_place(formats::binary16(), dy);
  const Tensor dx = l.backward(Tensor{dy, &formats::binary16()}, ctx, true);
  const auto& acc = pure.rule("linear").accumulation;
  const Matrix dx_fp32 = matmul(dy, l.weight.value.transpose(), acc);
  const Matrix dw_fp32 = matmul(x.transpose(), dy, acc);
  const Mask expect = dx_fp32.array() != 0 && dx.values.array() == 0;
  CHECK(expect.count() > 0);
  CHECK((dx.flushed == expect).all());
  CHECK(l.weight.grad_underflow == count_flushed(dw_fp32, l.weight.grad));
  CHECK(l.weight.grad_underflow > 0);

  // ReLU passes on the flushed entries where its mask lets the gradient
  // through; the masked-out zeros are not underflow.
  ReLU relu("act");
  Matrix pre = random_matrix(6, 24, 43);
  round_in_place(formats::binary16(), pre);
  relu.forward(Tensor{pre, &formats::binary16()}, ctx);
  const Tensor back = relu.backward(dx, ctx, true);
  CHECK((back.flushed == (dx.flushed && pre.array() > 0)).all());
  CHECK(back.underflow_count() < dx.underflow_count());
  CHECK(count_flushed(Matrix::Constant(1, 3, 1e-30), Matrix::Zero(1, 3)) == 3);
  CHECK(count_flushed(Matrix::Zero(1, 3), Matrix::Zero(1, 3)) == 0);
}

// LayerNorm's forward in a binary32 compute format (the rows' chains side by
// side in float vectors, layer_norm.cpp) against its definition written out
// one operation at a time, each rounded to binary32 by the exact core; rows
// of every scale, subnormal ones; and with a row whose sum overflows (its
// NaNs and infinities: the generic walk's, for the whole tensor).
TEST_CASE("train: LayerNorm in binary32 equals its definition rounded one operation at a time", "[train]") {
  const Format& f32 = formats::binary32();
  auto r32 = [&](double v) { return to_double(f32, round_double(f32, v, RoundingMode::nearest_even)); };
  const PrecisionPolicy fp32 = named_policy("fp32");
  const StepContext ctx{&fp32, 0, 0};
  const Eigen::Index rows = 37, n = 19;
  Matrix plain = random_matrix(rows, n, 41, 3.0);
  for (Eigen::Index i = 0; i < rows; ++i)
    plain.row(i) *= std::ldexp(1.0, int(i % 9) * 9 - 40);  // 2^-40 .. 2^32
  plain.row(5) *= 0x1p-100;                                // binary32 subnormals after the cast
  Matrix overflowing = plain;
  overflowing.row(7).setConstant(3e38);  // the sum overflows
  overflowing(7, 3) = -3e38;
  for (const auto& [x, eps] : {std::pair{plain, 1e-5}, std::pair{plain, 0.0}, std::pair{overflowing, 1e-5}}) {
    LayerNorm ln("ln", n, eps);
    ln.gamma.value = random_matrix(1, n, 42, 2.0);
    ln.beta.value = random_matrix(1, n, 43);
    const Matrix y = ln.forward(Tensor{x, &formats::binary64()}, ctx).values;
    REQUIRE(y.rows() == rows);
    for (Eigen::Index i = 0; i < rows; ++i) {
      std::vector<double> xi(static_cast<std::size_t>(n)), d(static_cast<std::size_t>(n));
      for (Eigen::Index j = 0; j < n; ++j) xi[std::size_t(j)] = r32(x(i, j));
      double sum = xi[0];
      for (Eigen::Index j = 1; j < n; ++j) sum = r32(sum + xi[std::size_t(j)]);
      const double mean = r32(sum / double(n));
      double sq = 0;
      for (Eigen::Index j = 0; j < n; ++j) {
        d[std::size_t(j)] = r32(xi[std::size_t(j)] - mean);
        const double s = r32(d[std::size_t(j)] * d[std::size_t(j)]);
        sq = j == 0 ? s : r32(sq + s);
      }
      const double rstd = r32(1.0 / std::sqrt(r32(r32(sq / double(n)) + eps)));
      for (Eigen::Index j = 0; j < n; ++j) {
        const double xh = r32(d[std::size_t(j)] * rstd);
        const double want = r32(r32(xh * r32(ln.gamma.value(0, j))) + r32(ln.beta.value(0, j)));
        INFO("eps " << eps << " row " << i << " column " << j << ": " << y(i, j) << " against " << want);
        if (std::isnan(want))
          CHECK(std::isnan(y(i, j)));
        else
          CHECK(std::bit_cast<std::uint64_t>(y(i, j)) == std::bit_cast<std::uint64_t>(want));
      }
    }
  }
}
