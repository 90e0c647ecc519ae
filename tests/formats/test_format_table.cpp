// The descriptor table against the numbers in the specs (IEEE 754-2019,
// OCP 8-bit FP 2023, OCP MX v1.0, NVIDIA TF32, LLVM's Float8*FNUZ), spec
// strings, and the errors for bad ones.
#include <catch2/catch.hpp>

#include <cmath>

#include "mpfr_oracle.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

using namespace rpsim;

namespace {

struct Row {
  const char* name;
  int bits;
  double max_finite;
  double min_normal;
  double min_positive;  // smallest subnormal, or the smallest normal without subnormals
  std::uint64_t max_finite_bits;
};

// Values as the specs state them, written out rather than derived.
const Row kRows[] = {
    {"binary64", 64, 1.7976931348623157e308, 0x1p-1022, 0x1p-1074, 0x7FEFFFFFFFFFFFFF},
    {"binary32", 32, 3.4028234663852886e38, 0x1p-126, 0x1p-149, 0x7F7FFFFF},
    {"tf32", 19, 0x1.ffcp127, 0x1p-126, 0x1p-136, 0x3FBFF},
    {"binary16", 16, 65504.0, 0x1p-14, 0x1p-24, 0x7BFF},
    {"bfloat16", 16, 0x1.fep127, 0x1p-126, 0x1p-133, 0x7F7F},
    {"e5m2", 8, 57344.0, 0x1p-14, 0x1p-16, 0x7B},
    {"e4m3", 8, 448.0, 0x1p-6, 0x1p-9, 0x7E},
    {"e4m3fnuz", 8, 240.0, 0x1p-7, 0x1p-10, 0x7F},
    {"e5m2fnuz", 8, 57344.0, 0x1p-15, 0x1p-17, 0x7F},
    {"e3m2", 6, 28.0, 0x1p-2, 0x1p-4, 0x1F},
    {"e2m3", 6, 7.5, 1.0, 0x1p-3, 0x1F},
    {"e2m1", 4, 6.0, 1.0, 0.5, 0x7},
    {"e8m0", 8, 0x1p127, 0x1p-127, 0x1p-127, 0xFE},
};

// Every parameter that decides a format's behaviour (the name aside).
void check_same_parameters(const Format& a, const Format& b) {
  INFO(a.name << " vs " << b.name);
  CHECK(a.exp_bits == b.exp_bits);
  CHECK(a.man_bits == b.man_bits);
  CHECK(a.bias == b.bias);
  CHECK(a.has_sign == b.has_sign);
  CHECK(a.has_zero == b.has_zero);
  CHECK(a.subnormals == b.subnormals);
  CHECK(a.nonfinite == b.nonfinite);
  CHECK(a.nan == b.nan);
  CHECK(a.overflow == b.overflow);
  CHECK(a.bits == b.bits);
  CHECK(a.emin == b.emin);
  CHECK(a.emax == b.emax);
  CHECK(a.max_significand == b.max_significand);
}

}  // namespace

TEST_CASE("named formats carry the values their specs give", "[format]") {
  REQUIRE(named_formats().size() == std::size(kRows));
  for (const Row& row : kRows) {
    const Format& f = format(row.name);
    INFO(row.name);
    CHECK(f.name == row.name);
    CHECK(f.bits == row.bits);
    CHECK(f.max_finite() == row.max_finite);
    CHECK(f.min_normal() == row.min_normal);
    CHECK(f.min_positive() == row.min_positive);
    CHECK(f.max_finite_bits(false) == row.max_finite_bits);
    CHECK(to_double(f, row.max_finite_bits) == row.max_finite);
    CHECK(to_double(f, f.min_positive_bits()) == row.min_positive);
    // The independent oracle's reading of the same fields agrees.
    CHECK(oracle::max_finite_encoding(f, false) == row.max_finite_bits);
    if (f.has_sign) {
      CHECK(f.max_finite_bits(true) == (row.max_finite_bits | f.sign_bit()));
      CHECK(to_double(f, f.max_finite_bits(true)) == -row.max_finite);
    }
  }
}

TEST_CASE("format details that the specs single out", "[format]") {
  // tf32 keeps binary32's exponent range with binary16's 10 fraction bits.
  const Format& tf32 = formats::tf32();
  CHECK(tf32.emin == formats::binary32().emin);
  CHECK(tf32.emax == formats::binary32().emax);
  CHECK(tf32.man_bits == 10);
  CHECK(std::abs(formats::bfloat16().max_finite() - 3.3895313892515355e38) < 1e24);
  // OCP E4M3FN: S.1111.111 is NaN, no infinities; E5M2 is IEEE-like.
  CHECK(format("e4m3").nonfinite == NonFinite::nan_only);
  CHECK(format("e4m3").nan == NanEncoding::all_ones);
  CHECK(format("e5m2").has_inf());
  // fnuz: the pattern of -0 is the NaN, bias one above OCP's.
  CHECK(format("e4m3fnuz").nan == NanEncoding::negative_zero);
  CHECK(format("e4m3fnuz").bias == 8);
  CHECK(format("e5m2fnuz").bias == 16);
  // MX FP6/FP4: all finite, saturating.
  for (const char* name : {"e3m2", "e2m3", "e2m1"}) {
    CHECK(format(name).nonfinite == NonFinite::finite_only);
    CHECK(format(name).overflow == Overflow::saturate);
    CHECK_FALSE(format(name).has_nan());
  }
  // E8M0: unsigned powers of two, no zero, 0xFF is NaN.
  const Format& e8m0 = format("e8m0");
  CHECK_FALSE(e8m0.has_sign);
  CHECK_FALSE(e8m0.has_zero);
  CHECK(to_double(e8m0, 0x00) == 0x1p-127);
  CHECK(to_double(e8m0, 0x7F) == 1.0);
  CHECK(std::isnan(to_double(e8m0, 0xFF)));
}

TEST_CASE("spec strings build the same rows as the named table", "[format]") {
  check_same_parameters(parse_format("e5m10"), formats::binary16());
  check_same_parameters(parse_format("e8m23"), formats::binary32());
  check_same_parameters(parse_format("e11m52"), formats::binary64());
  check_same_parameters(parse_format("e8m7"), formats::bfloat16());
  check_same_parameters(parse_format("e4m3fn"), format("e4m3"));
  check_same_parameters(parse_format("e5m2fnuz"), format("e5m2fnuz"));
  check_same_parameters(parse_format("e4m3fnuz"), format("e4m3fnuz"));
  check_same_parameters(parse_format("e3m2f"), format("e3m2"));
  check_same_parameters(parse_format("exp=5,man=10"), formats::binary16());
  check_same_parameters(format("fp16"), formats::binary16());
  check_same_parameters(format("bf16"), formats::bfloat16());

  const Format no_subnormals = parse_format("exp=5,man=10,subnormals=no");
  CHECK_FALSE(no_subnormals.subnormals);
  CHECK(no_subnormals.bits == 16);
  CHECK(no_subnormals.max_finite() == 65504.0);
  CHECK(no_subnormals.min_positive() == 0x1p-14);
  CHECK(no_subnormals.min_positive_bits() == 0x0400);
  // The interned custom format lives on and is found again.
  const Format& custom = format("exp=5,man=10,subnormals=no");
  CHECK(&custom == &format("exp=5,man=10,subnormals=no"));
  CHECK_FALSE(custom.subnormals);
}

TEST_CASE("bad format specs throw FormatError naming the input", "[format]") {
  for (const char* spec : {"e0m3", "e5m99", "exp=5", "foo", "exp=0,man=3", "e11m60", "e12m3", "e5m2zz",
                           "exp=5,man=10,subnormals=maybe", "exp=5,man=x"}) {
    INFO(spec);
    CHECK_THROWS_AS(parse_format(spec), FormatError);
    CHECK_THROWS_WITH(parse_format(spec), Catch::Contains(spec));
  }
  CHECK_THROWS_WITH(parse_format("exp=5"), Catch::Contains("man"));
  CHECK_THROWS_WITH(parse_format("e0m3"), Catch::Contains("exponent"));
  CHECK_THROWS_AS(parse_format(""), FormatError);
  CHECK_THROWS_AS(format("foo"), FormatError);
  // A row checked by hand: more than 64 bits of storage.
  Format wide;
  wide.name = "wide";
  wide.exp_bits = 11;
  wide.man_bits = 52;
  wide.has_sign = true;
  wide.bias = 1023;
  CHECK_NOTHROW(wide.finalize());  // 64 bits exactly
  Format too_wide = wide;
  too_wide.name = "too_wide";
  too_wide.man_bits = 53;
  CHECK_THROWS_WITH(too_wide.finalize(), Catch::Contains("too_wide"));
}
