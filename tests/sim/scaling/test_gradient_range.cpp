// Cast counts of gradient samples: hand-derived fp16 boundaries (the
// underflow tie at 2^-25, the overflow tie at 65520), the counts of random
// samples against a value-by-value loop over the formats core for several
// formats and scales, the log2 histogram, and the suggested scale range.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/unpacked.hpp"
#include "rpsim/scaling/gradient_range.hpp"

using namespace rpsim;
using namespace rpsim::sim::scaling;

TEST_CASE("scaling: fp16 cast counts at the format's boundaries", "[scaling]") {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {0x1p-26, 0x1p-25, 0x1.8p-25, 0x1p-15, 0x1p-14, 65504, 65520, 1e6, 0.0, inf, NAN};
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n; ++i)
    if (std::isfinite(v[i]) && v[i] != 0) v.push_back(-v[i]);
  const GradientSample s(v);
  CastCounts c = s.cast(formats::binary16(), 1.0);
  CHECK(c.entries == 19);
  CHECK(c.zeros == 1);
  CHECK(c.nonfinite == 2);
  CHECK(c.nonzero() == 16);
  CHECK(c.underflow == 4);  // 2^-26 and the tie 2^-25, each sign
  CHECK(c.subnormal == 4);  // 1.5 * 2^-25 -> 2^-24, and 2^-15
  CHECK(c.overflow == 4);   // the tie 65520 goes to even 2^16: infinity
  CHECK(c.underflow_fraction() == 0.25);
  c = s.cast(formats::binary16(), 0x1p-1);  // halves: 65520 -> 32760, 1e6 -> 5e5
  CHECK(c.overflow == 2);
  CHECK(c.underflow == 6);  // 1.5 * 2^-26 now rounds to 0 as well
  c = s.cast(formats::bfloat16(), 1.0);
  CHECK(c.underflow == 0);
  CHECK(c.subnormal == 0);
  CHECK(c.overflow == 0);
  CHECK_THROWS_AS(s.cast(formats::binary16(), 0.0), std::invalid_argument);
}

TEST_CASE("scaling: cast counts equal a value-by-value loop over the formats core", "[scaling]") {
  std::mt19937_64 gen(9);
  std::normal_distribution<double> normal;
  std::vector<double> v(20000);
  for (double& x : v) x = normal(gen) * std::ldexp(1.0, int(gen() % 60) - 45);
  v[0] = 0;
  const GradientSample s(v);
  for (const char* name : {"binary16", "bfloat16", "e4m3", "e5m2", "q16.14", "e5m10"}) {
    const Format& f = format(name);
    for (int e : {-8, 0, 7, 16, 30}) {
      INFO(name << " scale 2^" << e);
      CastCounts want;
      for (double x : v) {
        if (x == 0) continue;
        Flags fl = 0;
        const std::uint64_t b = round_double(f, x * std::ldexp(1.0, e), Rounding{}, fl);
        if (fl & flag_overflow)
          ++want.overflow;
        else if (to_double(f, b) == 0)
          ++want.underflow;
        else if (is_subnormal(f, b))
          ++want.subnormal;
      }
      const CastCounts got = s.cast(f, std::ldexp(1.0, e));
      CHECK(got.underflow == want.underflow);
      CHECK(got.subnormal == want.subnormal);
      CHECK(got.overflow == want.overflow);
      CHECK(got.nonzero() == 19999);
    }
  }
}

TEST_CASE("scaling: log2 histogram and the suggested static scale range", "[scaling]") {
  const std::vector<double> v = {0x1p-30, -0x1.fp-30, 1.0, 0.75, 0.0};
  const GradientSample s(v);
  const auto h = s.log2_histogram();
  CHECK(h.at(-30) == 2);
  CHECK(h.at(0) == 1);
  CHECK(h.at(-1) == 1);
  CHECK(s.zeros() == 1);
  // fp16: 2^-30 * 2^6 = 2^-24 survives (2^5 gives the tie 2^-25, lost);
  // 1.0 * 2^16 overflows. So 2^6 .. 2^15 with no underflow.
  const GradientSample* samples[] = {&s};
  const ScaleRange r = suggested_scale_range(samples, formats::binary16(), -10, 30);
  REQUIRE(r.any);
  CHECK(r.lo_log2 == 6);
  CHECK(r.hi_log2 == 15);
  CHECK(r.underflow == 0);
  // Only scales that overflow: none.
  CHECK_FALSE(suggested_scale_range(samples, formats::binary16(), 17, 20).any);
  // e4m3 (max 448) cannot hold 2^-30 and 1.0 together: the fewest
  // underflows (2) from 2^-9 (0.75 * 2^-10 would round to 0) up to the last
  // scale before 1.0 overflows (512 is beyond 448 and the tie at 464).
  const ScaleRange e4 = suggested_scale_range(samples, formats::e4m3(), -10, 30);
  REQUIRE(e4.any);
  CHECK(e4.underflow == 2);
  CHECK(e4.lo_log2 == -9);
  CHECK(e4.hi_log2 == 8);
}
