// holds(wide, narrow): checked against every encoding of each narrow format
// (8 and 16 bits, fixed point included) rounded to the wide one in every
// mode -- where holds says yes, each value comes back unchanged; and the
// pairs the op core relies on (a cast skipped) are among the yeses.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

using namespace rpsim;

namespace {

// Whether every encoding of `narrow` rounds to `wide` as itself, in every mode.
bool every_value_survives(const Format& wide, const Format& narrow) {
  const std::uint64_t n = std::uint64_t(1) << narrow.bits;
  for (std::uint64_t bits = 0; bits < n; ++bits) {
    const double v = to_double(narrow, bits);
    for (RoundingMode m : {RoundingMode::nearest_even, RoundingMode::toward_zero, RoundingMode::up,
                           RoundingMode::down, RoundingMode::odd, RoundingMode::nearest_away}) {
      const double w = to_double(wide, round_double(wide, v, m));
      if (std::isnan(v) ? !std::isnan(w) : (w != v || std::signbit(w) != std::signbit(v))) return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("formats: holds(wide, narrow) only where every value of narrow is a value of wide", "[formats]") {
  const char* narrow[] = {"e4m3",     "e5m2",     "e3m2",     "e2m3", "e2m1",   "e4m3fnuz",
                          "e5m2fnuz", "binary16", "bfloat16", "q8.4", "q16.14", "e8m0"};
  const char* wide[] = {"binary64", "binary32", "tf32",     "binary16", "bfloat16",
                        "e5m2",     "e4m3",     "e4m3fnuz", "q16.14"};
  int yes = 0;
  for (const char* n : narrow)
    for (const char* w : wide) {
      const Format& fw = format(w);
      const Format& fn = format(n);
      if (fn.bits > 16) continue;
      INFO(std::string(n) + " in " + w);
      if (holds(fw, fn)) {
        ++yes;
        CHECK(every_value_survives(fw, fn));
      }
    }
  CHECK(yes >= 20);
}

TEST_CASE("formats: holds on the casts the op core skips, and on the ones it must not", "[formats]") {
  CHECK(holds(formats::binary32(), formats::binary16()));
  CHECK(holds(formats::binary32(), formats::bfloat16()));
  CHECK(holds(formats::binary16(), formats::e4m3()));
  CHECK(holds(formats::binary32(), format("q16.14")));
  CHECK(holds(formats::binary64(), formats::binary32()));
  CHECK_FALSE(holds(formats::binary16(), formats::bfloat16()));  // range
  CHECK_FALSE(holds(formats::bfloat16(), formats::binary16()));  // precision
  CHECK_FALSE(holds(formats::e5m2(), formats::e4m3()));
  CHECK_FALSE(holds(formats::binary16(), formats::binary32()));
  CHECK_FALSE(holds(format("e4m3fnuz"), formats::e4m3()));  // -0 and the NaN encoding
}
