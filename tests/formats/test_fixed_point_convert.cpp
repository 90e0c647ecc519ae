// Signed fixed point, conversions: every binary16 encoding and every
// encoding of one Q format into others (exact-integer oracle, every mode,
// stochastic included); Q formats into floating point (MPFR oracle); binary64
// specials; the array path and the typed value layer against the scalar core.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fixed_point_cases.hpp"
#include "fixed_point_oracle.hpp"
#include "mpfr_oracle.hpp"
#include "rpsim/formats/array.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/print.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/value.hpp"

using namespace rpsim;
using fixed_oracle::i128;
using fixed_oracle::Q;
using fixed_oracle::Result;

namespace {

constexpr Q kTargets[] = {{2, 0}, {3, 1}, {4, 2}, {5, 5}, {6, 9}, {8, 4}, {12, 20}, {16, 14}, {16, 0}};

constexpr std::uint64_t kSeed = 11;  // this file's stochastic-rounding draws

// value = n * 2^e exactly, as K = value * 2^f rounded.
Result round_scaled(const Q& q, i128 n, int e, const Rounding& r) {
  const int shift = e + q.frac;
  if (shift >= 0) return fixed_oracle::round_ratio(q, n << shift, 1, r);
  return fixed_oracle::round_ratio(q, n, i128(1) << -shift, r);
}

// A binary16 encoding's exact value as n * 2^e, decoded from IEEE 754's
// layout here (not by the core); false for infinities and NaNs.
bool binary16_value(std::uint64_t h, i128& n, int& e) {
  const int field = int(h >> 10) & 0x1F;
  const std::int64_t frac = std::int64_t(h & 0x3FF);
  if (field == 0x1F) return false;
  n = field == 0 ? frac : frac | 0x400;
  e = (field == 0 ? 1 : field) - 15 - 10;
  if (h & 0x8000) n = -n;
  return true;
}

struct Tally {
  std::uint64_t checked = 0, failed = 0;
  std::string first;
  void check(const std::string& what, std::uint64_t want, Flags want_flags, std::uint64_t got,
             Flags got_flags) {
    ++checked;
    if (want == got && want_flags == got_flags) return;
    if (failed++ == 0) {
      std::ostringstream s;
      s << what << ": expected 0x" << std::hex << want << " flags 0x" << int(want_flags) << ", got 0x" << got
        << " flags 0x" << int(got_flags);
      first = s.str();
    }
  }
};

}  // namespace

TEST_CASE("formats: every binary16 into fixed point, every mode, against exact integers") {
  Tally t;
  for (const Q& q : kTargets) {
    const Format& to = fixed_cases::format_of(q);
    for (std::uint64_t h = 0; h < 0x10000; ++h) {
      i128 n = 0;
      int e = 0;
      const bool finite = binary16_value(h, n, e);
      const bool nan = !finite && (h & 0x3FF) != 0;
      for (RoundingMode m : fixed_cases::kModes) {
        const Rounding r = fixed_cases::rounding_for(kSeed, m, h);
        Flags fl = 0;
        const std::uint64_t got = convert(to, formats::binary16(), h, r, fl);
        Result want;
        if (finite)
          want = round_scaled(q, n, e, r);
        else if (nan)
          want = {0, flag_invalid};  // no NaN in fixed point: +0, invalid
        else
          want = {q.encode(h & 0x8000 ? q.min() : q.max()), Flags(flag_overflow | flag_inexact)};
        t.check(to.name + " <- binary16 0x" + std::to_string(h) + " " + std::string(rounding_name(m)),
                want.bits, want.flags, got, fl);
      }
    }
  }
  INFO(t.first);
  CHECK(t.failed == 0);
  CHECK(t.checked == 9 * 7 * 65536);
}

TEST_CASE("formats: fixed point into fixed point, every encoding and mode, against exact integers") {
  Tally t;
  for (const Q& from_q : {Q{8, 4}, Q{12, 20}, Q{6, 0}}) {
    const Format& from = fixed_cases::format_of(from_q);
    for (const Q& q : kTargets) {
      const Format& to = fixed_cases::format_of(q);
      for (std::uint64_t x = 0; x <= from_q.mask(); ++x) {
        for (RoundingMode m : fixed_cases::kModes) {
          const Rounding r = fixed_cases::rounding_for(kSeed, m, x);
          Flags fl = 0;
          const std::uint64_t got = convert(to, from, x, r, fl);
          const Result want = round_scaled(q, from_q.decode(x), -from_q.frac, r);
          t.check(to.name + " <- " + from.name + " " + std::to_string(x), want.bits, want.flags, got, fl);
        }
      }
    }
  }
  INFO(t.first);
  CHECK(t.failed == 0);
}

TEST_CASE("formats: fixed point into floating point against MPFR") {
  Tally t;
  for (const Q& q : {Q{8, 4}, Q{16, 14}, Q{16, 30}, Q{12, 0}}) {
    const Format& from = fixed_cases::format_of(q);
    for (const char* name : {"binary16", "bfloat16", "e4m3", "e5m2", "binary32"}) {
      const Format& to = format(name);
      for (std::uint64_t x = 0; x <= q.mask(); ++x) {
        oracle::Real v(64);
        mpfr_set_si_2exp(v, long(q.decode(x)), -q.frac, MPFR_RNDN);  // exact: at most 16 bits
        for (RoundingMode m :
             {RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero,
              RoundingMode::down, RoundingMode::up, RoundingMode::odd}) {
          Rounding r;
          r.mode = m;
          Flags fl = 0;
          const std::uint64_t got = convert(to, from, x, r, fl);
          const oracle::Expected want = oracle::round_exact(to, v, m);
          t.check(std::string(name) + " <- " + from.name + " " + std::to_string(x), want.bits, want.flags,
                  got, fl);
        }
      }
    }
  }
  INFO(t.first);
  CHECK(t.failed == 0);
}

TEST_CASE("formats: binary64 specials into fixed point") {
  const Format& q = format("q16.14");
  struct Case {
    double in;
    std::uint64_t bits;
    Flags flags;
  };
  const Case cases[] = {
      {1e300, 0x7FFF, flag_overflow | flag_inexact},
      {-1e300, 0x8000, flag_overflow | flag_inexact},
      {HUGE_VAL, 0x7FFF, flag_overflow | flag_inexact},
      {-HUGE_VAL, 0x8000, flag_overflow | flag_inexact},
      {std::nan(""), 0, flag_invalid},
      {-0.0, 0, 0},
      {0x1p-100, 0, flag_underflow | flag_inexact},
      {-2.0, 0x8000, 0},
      {2.0, 0x7FFF, flag_overflow | flag_inexact},
      {-2.0 - 0x1p-16, 0x8000, flag_inexact},  // rounds into range: no overflow
      {-2.0 - 0x1p-15, 0x8000, flag_inexact},  // the tie goes to the even -2^15
      {0x1p-14, 1, 0},
      {0x1p-15, 0, flag_underflow | flag_inexact},  // tie to even 0
      {0x1.8p-15, 1, flag_inexact},
  };
  for (const Case& c : cases) {
    INFO(c.in);
    Flags fl = 0;
    CHECK(round_double(q, c.in, Rounding{}, fl) == c.bits);
    CHECK(int(fl) == int(c.flags));
  }
  Flags fl = 0;
  Rounding up;
  up.mode = RoundingMode::up;
  CHECK(round_double(q, 0x1p-100, up, fl) == 1);  // away from 0: no underflow
  CHECK(int(fl) == int(flag_inexact));
  CHECK(to_double(q, 0x8000) == -2.0);
  CHECK(binary_fields(q, 0x8001) == "10 00000000000001");
  CHECK(classify(q, 0x8001) == "fixed point");
  CHECK_FALSE(is_subnormal(q, 1));
}

TEST_CASE("formats: fixed point arrays match the scalar core") {
  const Format& q = format("q16.14");
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<double> dist(-2.5, 2.5);
  std::vector<double> in(100000);
  for (double& x : in) x = dist(gen) * std::ldexp(1.0, int(gen() % 24) - 20);
  in[0] = std::nan("");
  in[1] = -HUGE_VAL;
  for (RoundingMode m : {RoundingMode::nearest_even, RoundingMode::toward_zero, RoundingMode::stochastic}) {
    ArrayOptions o;
    o.rounding.mode = m;
    o.seed = 5;
    std::vector<double> values(in.size());
    std::vector<std::uint16_t> codes(in.size());
    round_values(q, in, values, o);
    round_to_bits(q, std::span<const double>(in), std::span<std::uint16_t>(codes), o);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      Rounding r = o.rounding;
      r.random_bits = counter_random(o.seed, o.stream, i);
      Flags fl = 0;
      const std::uint64_t want = round_double(q, in[i], r, fl);
      bad += codes[i] != want || values[i] != to_double(q, want) ||
             (values[i] == 0 && std::signbit(values[i]));  // one zero: +0
    }
    CHECK(bad == 0);
  }
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = std::uint16_t(i);
  std::vector<double> dec(all.size());
  std::vector<float> decf(all.size());
  decode(q, all, dec);
  decode(q, all, decf);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < all.size(); ++i)
    bad += dec[i] != to_double(q, i) || double(decf[i]) != dec[i] || dec[i] != std::int16_t(i) * 0x1p-14;
  CHECK(bad == 0);
}

TEST_CASE("formats: typed fixed-point values saturate and flag like the core") {
  using q8_4 = Float<NamedFormat<"q8.4", std::uint8_t>>;
  ScopedRounding env(RoundingMode::nearest_even);
  const q8_4 a(1.5), b(-8.0);
  CHECK(double(a * a) == 2.25);
  CHECK(double(a / q8_4(0.25)) == 6.0);
  CHECK(env.flags() == 0);
  CHECK(double(-b) == 127.0 / 16);  // -(-8) saturates at 8 - 1/16
  CHECK((env.flags() & flag_overflow) != 0);
  CHECK(double(abs(q8_4(-3.0))) == 3.0);
  CHECK(double(-q8_4(0.0)) == 0.0);
  CHECK_FALSE(signbit(-q8_4(0.0)));
  CHECK(double(std::numeric_limits<q8_4>::max()) == 127.0 / 16);
  CHECK(double(std::numeric_limits<q8_4>::lowest()) == -8.0);
  CHECK(double(std::numeric_limits<q8_4>::min()) == 1.0 / 16);
  CHECK(double(std::numeric_limits<q8_4>::epsilon()) == 1.0 / 16);
  CHECK(double(std::numeric_limits<q8_4>::denorm_min()) == 1.0 / 16);
  CHECK(std::numeric_limits<q8_4>::has_denorm == std::denorm_absent);
  CHECK_FALSE(std::numeric_limits<q8_4>::has_infinity);
  CHECK(fmt::format("{} {:x} {:b}", q8_4(-0.5), q8_4(-0.5), q8_4(-0.5)) == "-0.5 0xF8 1111 1000");
}
