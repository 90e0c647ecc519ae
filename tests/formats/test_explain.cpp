// rpsim::explain, the facts behind `rpsim explain` and `rpsim.explain`: the
// neighbours, position, errors and flags of one value, checked against values
// worked out by hand from the formats' definitions.
#include <catch2/catch.hpp>
#include <cmath>

#include "rpsim/formats/explain.hpp"

using namespace rpsim;

TEST_CASE("explain 0.1 in binary16 lies between 0x2E66 and 0x2E67", "[explain]") {
  const Explanation x = explain(formats::binary16(), 0.1, RoundingMode::nearest_even);
  // 0.1 = 1.6 * 2^-4; binary16 spacing there is 2^-14, 0.1 / 2^-14 = 1638.4.
  REQUIRE(x.below == 0x2E66u);
  REQUIRE(x.above == 0x2E67u);
  REQUIRE(x.result == 0x2E66u);
  REQUIRE(x.spacing == std::ldexp(1.0, -14));
  REQUIRE(*x.position == Approx(0.4).epsilon(1e-9));
  REQUIRE(*x.error_ulps == Approx(-0.4).epsilon(1e-9));
  REQUIRE(x.flags == flag_inexact);
  REQUIRE_FALSE(x.representable);
  REQUIRE(x.unit_roundoff == std::ldexp(1.0, -11));
  REQUIRE(flag_names(x.flags) == "inexact");
  REQUIRE(x.all_modes[4].second == 0x2E67u);  // ru
}

TEST_CASE("explain a representable value has both neighbours and no error", "[explain]") {
  const Explanation x = explain(formats::binary16(), 1.0, RoundingMode::toward_zero);
  REQUIRE(x.representable);
  REQUIRE(x.result == 0x3C00u);
  REQUIRE(x.below == 0x3BFFu);
  REQUIRE(x.above == 0x3C01u);
  REQUIRE_FALSE(x.position);
  REQUIRE(x.abs_error == 0.0);
  REQUIRE(x.ulp == std::ldexp(1.0, -10));
  REQUIRE(flag_names(x.flags) == "none (exact)");
}

TEST_CASE("explain e4m3 overflow and the end of the format", "[explain]") {
  const Explanation x = explain(formats::e4m3(), 1000.0, RoundingMode::nearest_even);
  REQUIRE(x.result == 0x7Fu);  // E4M3FN overflows to NaN by default
  REQUIRE(std::isnan(x.result_value));
  REQUIRE(x.below == 0x7Eu);  // 448
  REQUIRE_FALSE(x.above);
  REQUIRE_FALSE(x.abs_error);
  REQUIRE((x.flags & flag_overflow) != 0);
}

TEST_CASE("explain stochastic rounding's probability is the truncated position", "[explain]") {
  // 1 + 3/4 of bfloat16's spacing at 1 (2^-7).
  const double v = 1.0 + 0.75 * std::ldexp(1.0, -7);
  const Explanation x = explain(formats::bfloat16(), v, RoundingMode::stochastic, 7);
  REQUIRE(x.sr_probability_away == 0.75);
  const Explanation neg = explain(formats::bfloat16(), -v, RoundingMode::stochastic, 7);
  REQUIRE(neg.sr_probability_away == 0.75);
  REQUIRE((x.result == 0x3F80u || x.result == 0x3F81u));
}

TEST_CASE("parse_number reads decimals, hex floats and infinities and names bad text", "[explain]") {
  REQUIRE(parse_number("0x1.8p-3").value == 0.1875);
  REQUIRE(std::isinf(parse_number("1e400").value));
  REQUIRE_FALSE(parse_number("1e400").note.empty());
  REQUIRE(parse_number("0.5").note.empty());
  REQUIRE_THROWS_WITH(parse_number("1.5abc"), Catch::Contains("'1.5abc'"));
  REQUIRE_THROWS_AS(parse_number(""), FormatError);
  REQUIRE_THROWS_AS(parse_number(" 1"), FormatError);
}

TEST_CASE("exact_decimal prints every digit", "[explain]") {
  REQUIRE(exact_decimal(0.1) == "0.1000000000000000055511151231257827021181583404541015625");
  REQUIRE(exact_decimal(-0.0) == "-0");
  REQUIRE(exact_decimal(1024.0) == "1024");
  REQUIRE(exact_decimal(std::ldexp(1.0, -3)) == "0.125");
  REQUIRE(exact_decimal(-INFINITY) == "-inf");
}
