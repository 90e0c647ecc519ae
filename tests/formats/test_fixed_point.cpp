// Signed fixed point (q<w>.<f>): the spec forms and their errors, and every
// operation exhaustively for small word lengths in every rounding mode
// (stochastic included, with known random bits) against the exact-integer
// oracle of fixed_point_oracle.hpp; conversions to floating point against
// the MPFR oracle; the array path and the typed value layer against the
// scalar core.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
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

// Word and fraction lengths: fraction shorter than, equal to and longer than
// the word, and no fraction at all.
constexpr Q kSmall[] = {{2, 0}, {2, 1}, {3, 1}, {4, 2}, {5, 0}, {5, 5}, {6, 3}, {6, 9}, {7, 2}};

constexpr std::uint64_t kSeed = 7;  // this file's stochastic-rounding draws

struct Tally {
  std::uint64_t checked = 0, failed = 0;
  std::string first;
  void check(const std::string& what, const Result& want, std::uint64_t got, Flags got_flags) {
    ++checked;
    if (want.bits == got && want.flags == got_flags) return;
    if (failed++ == 0) {
      std::ostringstream s;
      s << what << ": expected 0x" << std::hex << want.bits << " flags 0x" << int(want.flags) << ", got 0x"
        << got << " flags 0x" << int(got_flags);
      first = s.str();
    }
  }
};

std::string describe(const char* op, const Format& f, RoundingMode m, std::int64_t a, std::int64_t b) {
  return std::string(op) + " " + f.name + " " + std::string(rounding_name(m)) + " K=" + std::to_string(a) +
         "," + std::to_string(b);
}

// a op b for every pair of encodings, every mode.
void binary_ops(const Q& q, Tally& t) {
  const Format& f = fixed_cases::format_of(q);
  const i128 scale = i128(1) << q.frac;
  for (std::uint64_t x = 0; x <= q.mask(); ++x) {
    for (std::uint64_t y = 0; y <= q.mask(); ++y) {
      const i128 a = q.decode(x), b = q.decode(y);
      for (RoundingMode m : fixed_cases::kModes) {
        const Rounding r = fixed_cases::rounding_for(kSeed, m, x << 32 | y);
        Flags fl = 0;
        std::uint64_t got = add(f, x, y, r, fl);
        t.check(describe("add", f, m, a, b), fixed_oracle::round_ratio(q, a + b, 1, r), got, fl);
        fl = 0;
        got = sub(f, x, y, r, fl);
        t.check(describe("sub", f, m, a, b), fixed_oracle::round_ratio(q, a - b, 1, r), got, fl);
        fl = 0;
        got = mul(f, x, y, r, fl);
        t.check(describe("mul", f, m, a, b), fixed_oracle::round_ratio(q, a * b, scale, r), got, fl);
        fl = 0;
        got = div(f, x, y, r, fl);
        Result want;
        if (b != 0) {
          want = fixed_oracle::round_ratio(q, a * scale, b, r);
        } else if (a == 0) {
          want = {0, flag_invalid};  // no NaN: +0, the flag says so
        } else {                     // an infinite quotient saturates, as a converted infinity does
          want = {q.encode(a < 0 ? q.min() : q.max()), Flags(flag_infinite | flag_overflow | flag_inexact)};
        }
        t.check(describe("div", f, m, a, b), want, got, fl);
      }
    }
  }
}

void sqrt_and_fma(const Q& q, Tally& t) {
  const Format& f = fixed_cases::format_of(q);
  const i128 scale = i128(1) << q.frac;
  for (std::uint64_t x = 0; x <= q.mask(); ++x) {
    const i128 a = q.decode(x);
    for (RoundingMode m : fixed_cases::kModes) {
      const Rounding r = fixed_cases::rounding_for(kSeed, m, x);
      Flags fl = 0;
      const std::uint64_t got = rpsim::sqrt(f, x, r, fl);
      const Result want =
          a < 0 ? Result{0, flag_invalid} : fixed_oracle::round_sqrt(q, fixed_oracle::u128(a * scale), r);
      t.check(describe("sqrt", f, m, a, 0), want, got, fl);
    }
    for (std::uint64_t y = 0; y <= q.mask(); ++y) {
      for (std::uint64_t z = 0; z <= q.mask(); ++z) {
        const i128 b = q.decode(y), c = q.decode(z);
        for (RoundingMode m : fixed_cases::kModes) {
          const Rounding r = fixed_cases::rounding_for(kSeed, m, x << 40 | y << 20 | z);
          Flags fl = 0;
          const std::uint64_t got = rpsim::fma(f, x, y, z, r, fl);
          t.check(describe("fma", f, m, a, b) + "," + std::to_string(std::int64_t(c)),
                  fixed_oracle::round_ratio(q, a * b + c * scale, scale, r), got, fl);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("formats: fixed point spec forms name one row") {
  const Format& q = format("q16.14");
  CHECK(q.is_fixed_point());
  CHECK(q.bits == 16);
  CHECK(q.frac_bits == 14);
  CHECK(q.max_finite() == 2.0 - std::ldexp(1.0, -14));
  CHECK(q.lowest() == -2.0);
  CHECK(q.min_positive() == std::ldexp(1.0, -14));
  CHECK(q.max_finite_bits(false) == 0x7FFF);
  CHECK(q.max_finite_bits(true) == 0x8000);
  CHECK(parse_format("fixed:16:14") == q);
  CHECK(parse_format("word=16,frac=14") == q);
  CHECK(parse_format("kind=fixed,word=16,frac=14,name=gupta") == q);
  CHECK(parse_format("word=16,frac=14,name=gupta").name == "gupta");
  CHECK(fixed_point(16, 14) == q);
  CHECK_FALSE(parse_format("q16.13") == q);
  CHECK_FALSE(parse_format("q15.14") == q);
  for (const Format& named : named_formats()) CHECK_FALSE(named == q);
  // Word length 53 is the widest whose every value is a binary64.
  CHECK(parse_format("q53.0").max_finite() == std::ldexp(1.0, 52) - 1);
  CHECK(parse_format("q8.12").max_finite() == 127 * std::ldexp(1.0, -12));
}

TEST_CASE("formats: fixed point spec errors name the field") {
  const std::pair<const char*, const char*> bad[] = {
      {"q1.0", "word length 1 outside 2..53"},
      {"q54.3", "word length 54 outside 2..53"},
      {"q16", "needs word and fraction lengths"},
      {"q16.x", "'fraction length' is not an integer"},
      {"q16.", "'fraction length' has no value"},
      {"fixed:16", "needs word and fraction lengths"},
      {"fixed:16:-1", "fraction length -1 outside 0..1074"},
      {"q8.1075", "fraction length 1075 outside 0..1074"},
      {"word=16", "missing field 'frac'"},
      {"frac=3,word=16,exp=5", "'exp' is not a fixed-point field"},
      {"kind=fixed,frac=3", "missing field 'word'"},
  };
  for (const auto& [spec, why] : bad) {
    INFO(spec);
    try {
      (void)parse_format(spec);
      FAIL("accepted");
    } catch (const FormatError& e) {
      const std::string msg = e.what();
      CHECK(msg.find(std::string("format '") + spec + "'") != std::string::npos);
      CHECK(msg.find(why) != std::string::npos);
    }
  }
}

TEST_CASE("formats: fixed point add sub mul div, every pair and mode, against exact integers") {
  Tally t;
  for (const Q& q : kSmall) binary_ops(q, t);
  binary_ops({8, 4}, t);
  binary_ops({8, 7}, t);
  INFO(t.first);
  CHECK(t.failed == 0);
  CHECK(t.checked > 4'000'000);
}

TEST_CASE("formats: fixed point sqrt and fma, every operand and mode, against exact integers") {
  Tally t;
  for (const Q& q : kSmall) sqrt_and_fma(q, t);
  INFO(t.first);
  CHECK(t.failed == 0);
  CHECK(t.checked > 1'000'000);
}
