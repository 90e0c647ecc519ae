// The op core's step arithmetic (unscale, gradient norm, clipping) against
// the operations written out with the scalar core's rounding.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "rpsim/formats/rounding.hpp"
#include "rpsim/train/step_ops.hpp"

using namespace rpsim;
using namespace rpsim::sim::train;

namespace {

double r(const Format& f, double x) {
  return to_double(f, round_double(f, x, RoundingMode::nearest_even));
}

}  // namespace

TEST_CASE("train: unscale multiplies by binary32(1/scale), rounds to the gradients' format, counts flushes",
          "[train][op-core]") {
  const double scale = 3.0;  // 1/3 is not a binary32 value: the factor is rounded first
  const double inv = unscale_factor(scale);
  CHECK(inv == double(float(1.0 / 3.0)));
  std::vector<double> g = {1.0, -6.0e-8, 0.0, 3.0e-5, 1.5};
  const std::vector<double> before = g;
  const Unscaled u = unscale(g, inv, formats::binary16());
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == r(formats::binary16(), before[i] * inv));
  CHECK(u.flushed == 1);  // -6e-8 / 3 is below half of binary16's smallest subnormal
  CHECK_FALSE(u.nonfinite);
  std::vector<double> bad = {1.0, std::numeric_limits<double>::infinity()};
  CHECK(unscale(bad, 1.0, formats::binary32()).nonfinite);
}

// The Trainer's underflow masks: flushed[i] is whether entry i was nonzero
// and its product rounded to zero, on each path (binary64 carrier rounded
// to binary16 in chunks, binary32 carrier by float's multiply, a factor of 1).
TEST_CASE("train: unscale's flushed mask marks exactly the nonzero entries it rounded to zero",
          "[train][op-core]") {
  const std::size_t n = 9001;  // chunks of 512 and stretches of 4096, each with a short last one
  std::vector<double> g(n);
  for (std::size_t i = 0; i < n; ++i)  // magnitudes 2^-160..2^9, zeros, both signs
    g[i] = i % 5 == 0 ? 0.0 : std::ldexp(1.0 + double(i % 7) / 8, int(i * 29 % 170) - 160) * (i % 2 ? -1 : 1);
  const double inv = unscale_factor(65536.0);
  const auto check = [&](const auto& before, const auto& after, const std::vector<char>& mask,
                         std::int64_t flushed) {
    std::int64_t marked = 0, zeroed = 0;
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(bool(mask[i]) == (before[i] != 0 && after[i] == 0));
      marked += mask[i];
      zeroed += before[i] != 0 && after[i] == 0;
    }
    CHECK(marked == flushed);
    CHECK(zeroed > 0);  // the case the mask is for occurs
  };
  std::vector<double> h = g;
  bool m64[n], m32[n], m1[n];
  const Unscaled u64 = unscale(h, inv, formats::binary16(), std::span<bool>(m64, n));
  check(g, h, std::vector<char>(m64, m64 + n), u64.flushed);
  std::vector<float> f(g.begin(), g.end()), f0 = f;
  const Unscaled u32 = unscale(std::span<float>(f), inv, formats::binary32(), std::span<bool>(m32, n));
  check(f0, f, std::vector<char>(m32, m32 + n), u32.flushed);
  std::fill(m1, m1 + n, true);
  h = g;
  CHECK(unscale(h, 1.0, formats::binary16(), std::span<bool>(m1, n)).flushed == 0);
  CHECK(std::none_of(m1, m1 + n, [](bool b) { return b; }));
  CHECK_THROWS_AS(unscale(h, inv, formats::binary16(), std::span<bool>(m1, n - 1)), std::invalid_argument);
}

TEST_CASE("train: unscale gives each element's scalar rounding across its chunks, and sees a NaN anywhere",
          "[train][op-core]") {
  // unscale rounds in chunks of 512 through the array kernel: every element
  // must still be the scalar core's rounding, and the flush count and the
  // non-finite flag must cover every chunk, the last short one included.
  const double inv = unscale_factor(1024.0 * 3.0);
  for (const std::size_t n :
       {std::size_t(1), std::size_t(511), std::size_t(512), std::size_t(513), std::size_t(1500)}) {
    std::vector<double> g(n);
    for (std::size_t i = 0; i < n; ++i)  // every magnitude from 2^-30 to 2^20, both signs, some zeros
      g[i] =
          i % 7 == 3 ? 0.0 : std::ldexp(1.0 + double(i % 13) / 16, int(i * 37 % 51) - 30) * (i % 2 ? -1 : 1);
    const std::vector<double> before = g;
    const Unscaled u = unscale(g, inv, formats::binary16());
    std::int64_t flushed = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double want = r(formats::binary16(), before[i] * inv);
      CHECK(g[i] == want);
      flushed += before[i] != 0 && want == 0;
    }
    CHECK(u.flushed == flushed);
    CHECK_FALSE(u.nonfinite);
    for (const double bad :
         {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()}) {
      std::vector<double> h = before;
      h[n - 1] = bad;  // in the last chunk
      CHECK(unscale(h, inv, formats::binary32()).nonfinite);
      CHECK(std::isnan(h[n - 1]) == std::isnan(bad));  // kept, not dropped
      h = before;
      h[n / 2] = bad;
      CHECK(unscale(h, 1.0, formats::binary32()).nonfinite);
    }
  }
}

TEST_CASE("train: the gradient norm sums squares per tensor in order, then the tensors, one rounding each",
          "[train][op-core]") {
  const std::vector<double> a = {1e8, 1.0, -1e8}, b = {3.0, 4.0};
  const Format& c = formats::binary32();
  double ta = 0;
  for (double x : a) ta = r(c, ta + r(c, x * x));
  double tb = 0;
  for (double x : b) tb = r(c, tb + r(c, x * x));
  const double expect = r(c, std::sqrt(r(c, ta + tb)));
  CHECK(grad_norm({std::span<const double>(a), std::span<const double>(b)}, c) == expect);
  // In binary32 the 1 is lost beside 1e16: the order of the sum shows.
  CHECK(expect == r(c, std::sqrt(r(c, r(c, 1e16 + 1e16) + 25.0))));
}

TEST_CASE("train: the gradient norm across chunks and on binary32 carriers is the scalar formula's",
          "[train][op-core]") {
  // GradNorm squares and sums in chunks of 512, the running sum carried into
  // the next chunk; float spans are read where they lie. Terms of every
  // magnitude, so that an order or a rounding changed shows in the result.
  for (const Format* c : {&formats::binary32(), &formats::bfloat16(), &formats::binary64()}) {
    for (const std::size_t n :
         {std::size_t(0), std::size_t(1), std::size_t(512), std::size_t(513), std::size_t(1600)}) {
      std::vector<float> f(n);
      for (std::size_t i = 0; i < n; ++i)
        f[i] = float(std::ldexp(1.0 + double(i % 11) / 16, int(i * 29 % 41) - 20) * (i % 3 ? 1 : -1));
      const std::vector<double> d(f.begin(), f.end()), b = {3.0, 1e-3};
      double t = 0, s = 0;
      for (const double x : d) s = r(*c, s + r(*c, x * x));
      t = r(*c, t + s);
      s = 0;
      for (const double x : b) s = r(*c, s + r(*c, x * x));
      t = r(*c, t + s);
      const double expect = r(*c, std::sqrt(t));
      CHECK(grad_norm({std::span<const double>(d), std::span<const double>(b)}, *c) == expect);
      GradNorm norm(*c);
      norm.add(std::span<const float>(f));
      norm.add(std::span<const double>(b));
      CHECK(norm.value() == expect);
    }
  }
}

TEST_CASE("train: unscale on a binary32 carrier is the binary64 one's, stored back as binary32",
          "[train][op-core]") {
  const double inv = unscale_factor(65536.0);
  for (const std::size_t n : {std::size_t(3), std::size_t(700)}) {
    std::vector<float> f(n);
    for (std::size_t i = 0; i < n; ++i) f[i] = float(std::ldexp(1.0 + double(i % 5) / 8, int(i % 60) - 40));
    f[n - 1] = std::numeric_limits<float>::quiet_NaN();
    std::vector<double> d(f.begin(), f.end());
    const Unscaled ud = unscale(d, inv, formats::binary16());
    const Unscaled uf = unscale(std::span<float>(f), inv, formats::binary16());
    CHECK(uf.flushed == ud.flushed);
    CHECK(uf.flushed > 0);
    CHECK(uf.nonfinite);
    CHECK(ud.nonfinite);
    for (std::size_t i = 0; i + 1 < n; ++i) CHECK(double(f[i]) == d[i]);
    CHECK(std::isnan(f[n - 1]));
  }
}

// (Chunks of 512 for binary64; binary32's 32-bit counts run in stretches of 4096.)
TEST_CASE("train: count_nonfinite counts inf and NaN on either carrier, across its chunks",
          "[train][op-core]") {
  for (const std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(512), std::size_t(513),
                              std::size_t(1200), std::size_t(4096), std::size_t(9001)}) {
    std::vector<double> d(n);
    std::int64_t want = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const int kind = int(i * 7 % 11);
      d[i] = kind == 0   ? std::numeric_limits<double>::infinity()
             : kind == 1 ? -std::numeric_limits<double>::quiet_NaN()
             : kind == 2 ? -std::numeric_limits<double>::infinity()
             : kind == 3 ? std::numeric_limits<float>::max()
                         : std::ldexp(1.0, int(i % 200) - 150);  // binary32 subnormals to 2^49
      want += kind <= 2;
    }
    const std::vector<float> f(d.begin(), d.end());
    CHECK(count_nonfinite(std::span<const double>(d)) == want);
    CHECK(count_nonfinite(std::span<const float>(f)) == want);
  }
}

TEST_CASE("train: count_zero_vs counts zeros against nonzero finite references, on every carrier pair",
          "[train][op-core]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const std::size_t n :
       {std::size_t(0), std::size_t(3), std::size_t(512), std::size_t(1100), std::size_t(9001)}) {
    std::vector<double> e(n), r(n);
    std::int64_t want = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double refs[] = {0.0, -0.0, 1e-30, -2.5, inf, nan, 3.0};
      r[i] = refs[i % 7];
      e[i] = i % 3 == 0 ? 0.0 : (i % 3 == 1 ? -0.0 : r[i]);  // -0.0 is zero too
      want += (e[i] == 0) && r[i] != 0 && std::isfinite(r[i]);
    }
    const std::vector<float> ef(e.begin(), e.end()), rf(r.begin(), r.end());
    INFO(n << " entries");
    CHECK(count_zero_vs(std::span<const double>(e), std::span<const double>(r)) == want);
    CHECK(count_zero_vs(std::span<const float>(ef), std::span<const double>(r)) == want);
    CHECK(count_zero_vs(std::span<const double>(e), std::span<const float>(rf)) == want);
    CHECK(count_zero_vs(std::span<const float>(ef), std::span<const float>(rf)) == want);
  }
  const std::vector<double> a(3), b(4);
  CHECK_THROWS_AS(count_zero_vs(std::span<const double>(a), std::span<const double>(b)),
                  std::invalid_argument);
}

TEST_CASE("train: count_stalled counts nonzero gradients whose weight stayed, on every carrier",
          "[train][op-core]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const std::size_t n :
       {std::size_t(0), std::size_t(5), std::size_t(512), std::size_t(1301), std::size_t(9001)}) {
    std::vector<double> g(n), next(n), value(n);
    std::int64_t want = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double grads[] = {0.0, -0.0, 1e-30, nan, -2.0};
      g[i] = grads[i % 5];
      value[i] = i % 11 == 0 ? nan : double(i % 7) * 0.25;
      next[i] = i % 3 == 0 ? value[i] : value[i] + 1.0;  // a NaN weight never equals itself
      want += g[i] != 0 && next[i] == value[i];
    }
    const std::vector<float> gf(g.begin(), g.end()), nf(next.begin(), next.end()),
        vf(value.begin(), value.end());
    INFO(n << " entries");
    CHECK(want <= std::int64_t(n));
    CHECK(count_stalled(std::span<const double>(g), std::span<const double>(next),
                        std::span<const double>(value)) == want);
    CHECK(count_stalled(std::span<const float>(gf), std::span<const float>(nf), std::span<const float>(vf)) ==
          want);
    CHECK(count_stalled(std::span<const float>(gf), std::span<const double>(next),
                        std::span<const double>(value)) == want);
    CHECK(count_stalled(std::span<const double>(g), std::span<const float>(nf), std::span<const float>(vf)) ==
          want);
    if (n > 100) CHECK(want > 0);  // the cases above do stall some
  }
  const std::vector<double> a(3), b(4);
  CHECK_THROWS_AS(
      count_stalled(std::span<const double>(a), std::span<const double>(a), std::span<const double>(b)),
      std::invalid_argument);
}

TEST_CASE("train: the clipping factor and the clipped gradients", "[train][op-core]") {
  const Format& c = formats::binary32();
  const double coef = clip_coefficient(1.0, 10.0, c);
  CHECK(coef == r(c, 1.0 / r(c, 10.0 + 1e-6)));
  std::vector<double> g = {10.0, 1e-40, -2.5};
  const std::int64_t flushed = scale_gradient(g, coef, formats::binary16());
  CHECK(g[0] == r(formats::binary16(), 10.0 * coef));
  CHECK(g[1] == 0.0);
  CHECK(flushed == 1);
}

TEST_CASE("train: gradient accumulation casts the first micro-batch and rounds each later sum once",
          "[train][op-core]") {
  const Format& bf16 = formats::bfloat16();
  std::vector<double> sum(3);
  const std::vector<double> g0 = {1.0 + std::ldexp(1.0, -9), 1e-45, 3.0},
                            g1 = {std::ldexp(1.0, -9), 0.0, -3.0};
  // The cast: 1 + 2^-9 ties to 1 (even); 1e-45 is below half of bfloat16's smallest subnormal (2^-133).
  CHECK(accumulate_gradient(sum, g0, bf16, true) == 1);
  CHECK(sum == std::vector<double>{1.0, 0.0, 3.0});
  // Then sum + g in binary64 and one rounding: 1 + 2^-9 ties to 1 again (not 1 + 2^-8 from two
  // roundings of 1 + 2^-9 + 2^-9); 3 - 3 is an exact zero, no flush.
  CHECK(accumulate_gradient(sum, g1, bf16, false) == 0);
  CHECK(sum == std::vector<double>{1.0, 0.0, 0.0});
  CHECK(r(bf16, r(bf16, 1.0 + std::ldexp(1.0, -9)) + std::ldexp(1.0, -9)) == 1.0);
}
