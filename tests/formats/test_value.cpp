// The typed value layer (value.hpp) and the scoped rounding environment
// (scoped_rounding.hpp): every operator is one call of the core under the
// current scope, flags accumulate, limits match the format, and Eigen
// matrices of typed values round after every operation.
#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <sstream>

#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/scoped_rounding.hpp"
#include "rpsim/formats/value.hpp"
#include "value_samples.hpp"

using namespace rpsim;
using rpsim::test::random_value;

TEST_CASE("operators round once after every operation", "[value]") {
  REQUIRE(rounding_environment().rounding.mode == RoundingMode::nearest_even);
  const half big(2048.0), one(1.0);
  // binary16 spacing at 2048 is 2: 2049 is a tie, RNE keeps the even 2048.
  CHECK(double(big + one) == 2048.0);
  CHECK(double(big - one) == 2047.0);  // below 2048 the spacing is 1
  {
    ScopedRounding up(RoundingMode::up);
    CHECK(double(big + one) == 2050.0);  // 2049 is not representable; RU goes to 2050
    CHECK(double(half(2048.5)) == 2050.0);
  }
  CHECK(double(big + one) == 2048.0);  // restored

  const bfloat16 b256(256.0), b1(1.0);  // bfloat16: 8 significant bits, spacing 2 at 256
  CHECK(double(b256 + b1) == 256.0);
  {
    ScopedRounding up(RoundingMode::up);
    CHECK(double(b256 + b1) == 258.0);
  }
  {
    ScopedRounding down(RoundingMode::down);
    CHECK(double(-b256 - b1) == -258.0);
    CHECK(double(b256 + b1) == 256.0);
  }

  // Two roundings (mul then add) differ from one (fma): 1+2^-10 squared in
  // binary16 is 1 + 2^-9 + 2^-20; minus (1 + 2^-9) leaves 2^-20 only in fma.
  const half x(1.0 + 0x1p-10), c(-(1.0 + 0x1p-9));
  CHECK(double(x * x + c) == 0.0);
  CHECK(double(fma(x, x, c)) == 0x1p-20);
}

TEST_CASE("every operator is exactly the core operation under the scope's rounding", "[value]") {
  const Format& f = half::format();
  for (RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::toward_zero, RoundingMode::up,
                            RoundingMode::down, RoundingMode::nearest_away, RoundingMode::odd}) {
    ScopedRounding scope(mode);
    Rounding r;
    r.mode = mode;
    for (std::uint64_t i = 0; i < 2000; ++i) {
      const half a = random_value<half>(2 * i), b = random_value<half>(2 * i + 1),
                 c = random_value<half>(i + 7777);
      Flags fl = 0;
      INFO("mode " << rounding_name(mode) << " a=" << fmt::format("{:x}", a)
                   << " b=" << fmt::format("{:x}", b));
      CHECK((a + b).bits() == add(f, a.bits(), b.bits(), r, fl));
      CHECK((a - b).bits() == sub(f, a.bits(), b.bits(), r, fl));
      CHECK((a * b).bits() == mul(f, a.bits(), b.bits(), r, fl));
      CHECK((a / b).bits() == div(f, a.bits(), b.bits(), r, fl));
      CHECK(sqrt(abs(a)).bits() == rpsim::sqrt(f, abs(a).bits(), r, fl));
      CHECK(fma(a, b, c).bits() == rpsim::fma(f, a.bits(), b.bits(), c.bits(), r, fl));
      half acc = a;
      acc += b;
      acc *= c;
      acc -= a;
      acc /= b;
      std::uint64_t ref = add(f, a.bits(), b.bits(), r, fl);
      ref = mul(f, ref, c.bits(), r, fl);
      ref = sub(f, ref, a.bits(), r, fl);
      ref = div(f, ref, b.bits(), r, fl);
      CHECK(acc.bits() == ref);
      // Conversions between typed values are the core's convert.
      CHECK(bfloat16(a).bits() == convert(bfloat16::format(), f, a.bits(), r, fl));
      CHECK(float8_e4m3(a).bits() == convert(float8_e4m3::format(), f, a.bits(), r, fl));
      CHECK(half(binary32(a)).bits() == a.bits());  // widening is exact, narrowing back too
    }
  }
}

TEST_CASE("construction and conversion", "[value]") {
  CHECK(half(0.1).bits() == 0x2E66);
  CHECK(half(0.1f).bits() == 0x2E66);
  CHECK(double(half(0.1)) == 0.0999755859375);
  CHECK(half(2049).bits() == half(2048.0).bits());  // integers round once, RNE
  CHECK(half(-3).bits() == 0xC200);
  // 2^53 + 1 as an integer rounds in one step (through double it would round
  // to 2^53 first; here the exact integer is rounded).
  {
    ScopedRounding up(RoundingMode::up);
    CHECK(double(binary64(std::int64_t(9007199254740993))) == 9007199254740994.0);
  }
  CHECK(half::from_bits(0x7C00) == std::numeric_limits<half>::infinity());
  CHECK(half::from_bits(0x1'3C00).bits() == 0x3C00);  // masked to the format's width
  CHECK(float(half(1.0 / 3)) == float(double(half(1.0 / 3))));
  CHECK(sizeof(half) == 2);
  CHECK(sizeof(float8_e4m3) == 1);
  CHECK(sizeof(binary64) == 8);
  // E4M3 has no infinity: 1000 overflows to NaN (OCP E4M3FN), 448 is its max.
  clear_flags();
  CHECK(isnan(float8_e4m3(1000.0)));
  CHECK(test_flags(flag_overflow));
  CHECK(double(float8_e4m3(448.0)) == 448.0);
  CHECK(double(float4_e2m1(100.0)) == 6.0);  // MX FP4 saturates
  CHECK(double(float6_e3m2(0.3)) == 0.3125);
  CHECK(double(float6_e2m3(0.3)) == 0.25);  // spacing 1/8 in [0,1): 0.3 is nearer 0.25
  CHECK(double(tf32(1.0 + 0x1p-11)) == 1.0);
  CHECK(double(tf32(1.0 + 0x1p-10)) == 1.0 + 0x1p-10);
  CHECK(double(float8_e5m2(0.3)) == 0.3125);
  // Negation and abs are sign-bit operations; fnuz formats have a single zero.
  CHECK((-half(0.0)).bits() == 0x8000);
  CHECK((-float8_e4m3fnuz(0.0)).bits() == 0x00);
  CHECK(isnan(-std::numeric_limits<float8_e4m3fnuz>::quiet_NaN()));
  CHECK(abs(half(-2.5)).bits() == half(2.5).bits());
  CHECK(signbit(half(-0.0)));
}

TEST_CASE("scoped rounding modes nest and restore", "[value]") {
  const half one(1.0), three(3.0);
  const double rne = double(one / three);
  double ru = 0, rd = 0, rtz_inner = 0;
  {
    ScopedRounding up(RoundingMode::up);
    ru = double(one / three);
    {
      ScopedRounding tz(RoundingMode::toward_zero);
      CHECK(rounding_environment().rounding.mode == RoundingMode::toward_zero);
      rtz_inner = double(one / three);
      {
        ScopedRounding down(RoundingMode::down);
        rd = double(-one / three);
      }
      CHECK(rounding_environment().rounding.mode == RoundingMode::toward_zero);
    }
    CHECK(rounding_environment().rounding.mode == RoundingMode::up);
    CHECK(double(one / three) == ru);
  }
  CHECK(rounding_environment().rounding.mode == RoundingMode::nearest_even);
  CHECK(ru > 1.0 / 3);
  CHECK(rne < 1.0 / 3);  // 1/3 in binary16 rounds down to nearest
  CHECK(rtz_inner == rne);
  CHECK(rd == -ru);

  // A mode-only guard keeps the enclosing FTZ setting; a Rounding guard replaces all.
  {
    ScopedRounding ftz(RoundingMode::nearest_even);
    ftz.set_flush_subnormals(true, false);
    const half tiny(0x1p-14), two(2.0);
    CHECK(double(tiny / two) == 0.0);  // subnormal result flushed
    {
      ScopedRounding up(RoundingMode::up);
      CHECK(double(tiny / two) == 0.0);
    }
    {
      ScopedRounding fresh{Rounding{}};
      CHECK(double(tiny / two) == 0x1p-15);
    }
  }
  CHECK(double(half(0x1p-14) / half(2.0)) == 0x1p-15);
  // Overflow override: saturate instead of infinity.
  {
    ScopedRounding sat(RoundingMode::nearest_even);
    sat.set_overflow(Overflow::saturate);
    CHECK(double(std::numeric_limits<half>::max() * half(2.0)) == 65504.0);
  }
  CHECK(isinf(std::numeric_limits<half>::max() * half(2.0)));
  CHECK_THROWS_AS(ScopedRounding(RoundingMode::stochastic).set_stochastic_bits(0), FormatError);
  CHECK(rounding_environment().rounding.mode == RoundingMode::nearest_even);
}

TEST_CASE("exception flags accumulate in the scope and reach the enclosing one", "[value]") {
  clear_flags();
  const half max = std::numeric_limits<half>::max();
  {
    ScopedRounding outer(RoundingMode::nearest_even);
    CHECK(outer.flags() == 0);
    CHECK(double(half(1.0) + half(2.0)) == 3.0);
    CHECK(outer.flags() == 0);  // exact
    {
      ScopedRounding inner(RoundingMode::nearest_even);
      CHECK(isinf(max * half(2.0)));
      CHECK(inner.flags() == (flag_overflow | flag_inexact));
      inner.clear(flag_inexact);
      CHECK(inner.flags() == flag_overflow);
    }
    CHECK(outer.test(flag_overflow));
    CHECK(!outer.test(flag_invalid));
    outer.clear();
    CHECK(outer.flags() == 0);
    CHECK(isnan(sqrt(half(-1.0))));
    CHECK(outer.flags() == flag_invalid);
    CHECK(isinf(half(1.0) / half(0.0)));
    CHECK(outer.test(flag_infinite));
    CHECK(!outer.test(flag_underflow));
    const half tiny = half(0x1p-14) * half(0x1p-3 + 0x1p-12);  // inexact subnormal
    CHECK(outer.test(flag_underflow));
    CHECK(double(tiny) > 0);
    outer.clear();
    const bool unordered = half::from_bits(0x7E00) < half(1.0);
    CHECK(!unordered);
    CHECK(outer.flags() == flag_invalid);  // < signals on a quiet NaN
  }
  CHECK(test_flags() == flag_invalid);  // what the guard held when it ended
  clear_flags();
  CHECK(test_flags() == 0);
}

TEST_CASE("comparisons follow IEEE semantics, NaN is unordered", "[value]") {
  clear_flags();
  const half nan = std::numeric_limits<half>::quiet_NaN();
  const half one(1.0), two(2.0);
  CHECK_FALSE(nan == nan);
  CHECK(nan != nan);
  CHECK_FALSE(nan == one);
  CHECK(test_flags(flag_invalid) == 0);  // == is quiet for a quiet NaN
  CHECK_FALSE(nan < one);
  CHECK_FALSE(nan <= one);
  CHECK_FALSE(nan > one);
  CHECK_FALSE(nan >= one);
  CHECK_FALSE(one < nan);
  CHECK(test_flags(flag_invalid) != 0);  // relations signal
  clear_flags();
  CHECK(half(0.0) == half(-0.0));
  CHECK_FALSE(half(-0.0) < half(0.0));
  CHECK(one < two);
  CHECK(one <= one);
  CHECK(two > one);
  CHECK(two >= two);
  CHECK(-two < one);
  CHECK(std::numeric_limits<half>::lowest() <= -std::numeric_limits<half>::max() + one);
  CHECK(test_flags() == flag_inexact);  // only from the rounded -max + 1
  clear_flags();
  // A signalling NaN raises invalid even for ==.
  CHECK_FALSE(std::numeric_limits<half>::signaling_NaN() == one);
  CHECK(test_flags(flag_invalid));
  clear_flags();
}

TEST_CASE("numeric_limits agree with the native types and the formats", "[value]") {
  using L32 = std::numeric_limits<binary32>;
  using F = std::numeric_limits<float>;
  CHECK(L32::digits == F::digits);
  CHECK(L32::digits10 == F::digits10);
  CHECK(L32::max_digits10 == F::max_digits10);
  CHECK(L32::min_exponent == F::min_exponent);
  CHECK(L32::max_exponent == F::max_exponent);
  CHECK(L32::min_exponent10 == F::min_exponent10);
  CHECK(L32::max_exponent10 == F::max_exponent10);
  CHECK(float(L32::epsilon()) == F::epsilon());
  CHECK(float(L32::min()) == F::min());
  CHECK(float(L32::max()) == F::max());
  CHECK(float(L32::lowest()) == F::lowest());
  CHECK(float(L32::denorm_min()) == F::denorm_min());
  CHECK(float(L32::round_error()) == F::round_error());
  CHECK(L32::is_iec559);
  CHECK(L32::has_infinity);
  CHECK(L32::has_signaling_NaN);
  using L64 = std::numeric_limits<binary64>;
  using D = std::numeric_limits<double>;
  CHECK(L64::digits == D::digits);
  CHECK(L64::digits10 == D::digits10);
  CHECK(L64::max_digits10 == D::max_digits10);
  CHECK(L64::min_exponent10 == D::min_exponent10);
  CHECK(L64::max_exponent10 == D::max_exponent10);
  CHECK(double(L64::max()) == D::max());
  CHECK(double(L64::denorm_min()) == D::denorm_min());
}

TEST_CASE("numeric_limits of the narrow formats follow their format rows", "[value]") {
  using H = std::numeric_limits<half>;
  CHECK(H::digits == 11);
  CHECK(H::digits10 == 3);
  CHECK(H::max_digits10 == 5);
  CHECK(H::min_exponent == -13);
  CHECK(H::max_exponent == 16);
  CHECK(double(H::epsilon()) == 0x1p-10);
  CHECK(double(H::min()) == 0x1p-14);
  CHECK(double(H::max()) == 65504.0);
  CHECK(double(H::lowest()) == -65504.0);
  CHECK(double(H::denorm_min()) == 0x1p-24);
  CHECK(std::isinf(double(H::infinity())));
  CHECK(isnan(H::quiet_NaN()));
  CHECK(isnan(H::signaling_NaN()));
  CHECK(H::has_denorm == std::denorm_present);

  using B = std::numeric_limits<bfloat16>;
  CHECK(B::digits == 8);
  CHECK(double(B::max()) == 0x1.FEp127);
  CHECK(double(B::epsilon()) == 0x1p-7);
  CHECK(double(B::denorm_min()) == 0x1p-133);

  using E4 = std::numeric_limits<float8_e4m3>;
  CHECK_FALSE(E4::has_infinity);
  CHECK(E4::has_quiet_NaN);
  CHECK_FALSE(E4::has_signaling_NaN);
  CHECK_FALSE(E4::is_iec559);
  CHECK(double(E4::max()) == 448.0);
  CHECK(double(E4::min()) == 0x1p-6);
  CHECK(double(E4::denorm_min()) == 0x1p-9);
  CHECK(double(E4::epsilon()) == 0.125);
  CHECK(isnan(E4::quiet_NaN()));
  CHECK(E4::infinity().bits() == E4::max().bits());  // no infinity: the standard's fallback

  using E5 = std::numeric_limits<float8_e5m2>;
  CHECK(double(E5::max()) == 57344.0);
  CHECK(E5::has_infinity);
  CHECK(double(E5::denorm_min()) == 0x1p-16);

  using F4 = std::numeric_limits<float4_e2m1>;
  CHECK(double(F4::max()) == 6.0);
  CHECK(double(F4::min()) == 1.0);
  CHECK(double(F4::denorm_min()) == 0.5);
  CHECK(double(F4::epsilon()) == 0.5);
  CHECK_FALSE(F4::has_quiet_NaN);
  CHECK_FALSE(F4::has_infinity);
  CHECK(double(std::numeric_limits<float6_e3m2>::max()) == 28.0);
  CHECK(double(std::numeric_limits<float6_e2m3>::max()) == 7.5);
  CHECK(double(std::numeric_limits<float8_e4m3fnuz>::max()) == 240.0);
  CHECK(double(std::numeric_limits<float8_e8m0>::min()) == 0x1p-127);
  CHECK(double(std::numeric_limits<float8_e8m0>::max()) == 0x1p127);
  CHECK(double(std::numeric_limits<tf32>::epsilon()) == 0x1p-10);
}

TEST_CASE("fmt and ostream print the exact decimal or the bits", "[value]") {
  const half v(0.1);
  CHECK(fmt::format("{}", v) == "0.0999755859375");
  CHECK(fmt::format("{:x}", v) == "0x2E66");
  CHECK(fmt::format("{:b}", v) == "0 01011 1001100110");
  CHECK(fmt::format("{}", float8_e4m3(1000.0)).find("nan") != std::string::npos);
  std::ostringstream os;
  os << bfloat16(3.0);
  CHECK(os.str() == "3");
}
