// Every binary16 and every bfloat16 encoding converted to every named format
// in every deterministic mode, against the MPFR oracle: result bits and flags.
#include <mpfr.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

#include "mpfr_oracle.hpp"
#include "rpsim/formats/ops.hpp"

using namespace rpsim;

namespace {

constexpr std::array<const char*, 13> kTargets = {"binary64", "binary32", "tf32",     "binary16", "bfloat16",
                                                  "e5m2",     "e4m3",     "e4m3fnuz", "e5m2fnuz", "e3m2",
                                                  "e2m3",     "e2m1",     "e8m0"};
constexpr std::array<RoundingMode, 6> kModes = {RoundingMode::nearest_even, RoundingMode::nearest_away,
                                                RoundingMode::toward_zero,  RoundingMode::down,
                                                RoundingMode::up,           RoundingMode::odd};

struct Tally {
  std::uint64_t checked = 0;
  std::uint64_t failed = 0;
  std::vector<std::string> first_failures;
};

std::string mismatch(const Format& from, const Format& to, std::uint64_t in, RoundingMode mode, bool ftz,
                     const oracle::Expected& want, std::uint64_t got, Flags got_flags) {
  std::ostringstream s;
  s << oracle::describe(from, in) << " -> " << to.name << " " << rounding_name(mode) << (ftz ? " ftz" : "")
    << ": expected 0x" << std::hex << want.bits << " flags 0x" << int(want.flags) << ", got 0x" << got
    << " flags 0x" << int(got_flags);
  return s.str();
}

// All 2^16 encodings of `from` into `to`; the inputs are split over threads
// (MPFR keeps its exponent range per thread when built with TLS).
void sweep(const Format& from, const Format& to, RoundingMode mode, bool ftz, Tally& tally,
           bool daz = false) {
  std::uint64_t failed = 0;
  std::vector<std::string> notes;
#pragma omp parallel for schedule(static) reduction(+ : failed) if (mpfr_buildopt_tls_p())
  for (int i = 0; i < 1 << 16; ++i) {
    const auto in = std::uint64_t(i);
    Rounding r;
    r.mode = mode;
    r.flush_subnormal_outputs = ftz;
    r.flush_subnormal_inputs = daz;
    Flags got_flags = 0;
    const std::uint64_t got = convert(to, from, in, r, got_flags);
    oracle::Options opt;
    opt.flush_subnormal_outputs = ftz;
    opt.flush_subnormal_inputs = daz;
    const oracle::Expected want = oracle::convert(to, from, in, mode, opt);
    if (got != want.bits || got_flags != want.flags) {
      ++failed;
#pragma omp critical
      if (notes.size() < 4) notes.push_back(mismatch(from, to, in, mode, ftz, want, got, got_flags));
    }
  }
  tally.checked += 1 << 16;
  tally.failed += failed;
  for (auto& n : notes)
    if (tally.first_failures.size() < 12) tally.first_failures.push_back(std::move(n));
}

void report(const Tally& t) {
  std::string notes;
  for (const auto& n : t.first_failures) notes += "\n  " + n;
  INFO(t.failed << " of " << t.checked << " conversions differ from MPFR:" << notes);
  CHECK(t.failed == 0);
}

}  // namespace

TEST_CASE("every binary16 encoding converts to every format as MPFR rounds it", "[convert][mpfr]") {
  Tally t;
  for (const char* name : kTargets)
    for (RoundingMode mode : kModes) sweep(formats::binary16(), format(name), mode, false, t);
  CHECK(t.checked == 13u * 6u * 65536u);
  report(t);
}

TEST_CASE("every bfloat16 encoding converts to every format as MPFR rounds it", "[convert][mpfr]") {
  Tally t;
  for (const char* name : kTargets)
    for (RoundingMode mode : kModes) sweep(formats::bfloat16(), format(name), mode, false, t);
  CHECK(t.checked == 13u * 6u * 65536u);
  report(t);
}

TEST_CASE("conversions that flush subnormal outputs match MPFR with FTZ", "[convert][mpfr]") {
  Tally t;
  for (const Format* from : {&formats::binary16(), &formats::bfloat16()})
    for (const char* name : {"binary16", "bfloat16", "e4m3", "e5m2", "e2m1"})
      for (RoundingMode mode : kModes) sweep(*from, format(name), mode, true, t);
  CHECK(t.checked == 2u * 5u * 6u * 65536u);
  report(t);
}

TEST_CASE("conversions that read subnormal inputs as zero match MPFR with DAZ", "[convert][mpfr]") {
  Tally t;
  for (const Format* from : {&formats::binary16(), &formats::bfloat16()})
    for (const char* name : {"binary32", "e4m3", "e5m2", "e8m0"})
      for (RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::down, RoundingMode::odd})
        sweep(*from, format(name), mode, false, t, true);
  CHECK(t.checked == 2u * 4u * 3u * 65536u);
  report(t);
}

TEST_CASE("random binary64 and binary32 values convert to every format as MPFR rounds them",
          "[convert][mpfr]") {
  // Exponents drawn around each target's range (deep underflow to overflow),
  // significands often short so that exact and midpoint cases come up.
  std::mt19937_64 rng(0xC0417);
  Tally t;
  for (const Format* from : {&formats::binary64(), &formats::binary32()}) {
    for (const char* name : kTargets) {
      const Format& to = format(name);
      for (RoundingMode mode : kModes) {
        std::uint64_t failed = 0;
        for (int i = 0; i < 6000; ++i) {
          const int span = to.emax - to.emin + to.man_bits + 12;
          int e = to.emin - to.man_bits - 6 + int(rng() % std::uint64_t(span));
          if (i % 16 == 0) e = int(rng() % 600) - 300;
          e = std::clamp(e, 1 - from->bias, from->bias);
          std::uint64_t fraction = rng() & from->man_mask();
          if (i % 3 == 0) fraction &= ~(from->man_mask() >> (to.man_bits + 2 + int(rng() % 3)));
          std::uint64_t in = std::uint64_t(e + from->bias) << from->man_bits | fraction;
          if (rng() & 1) in |= from->sign_bit();
          if (i % 64 == 0) in = rng() & from->bit_mask();  // NaNs, infinities, subnormals
          Rounding r;
          r.mode = mode;
          Flags got_flags = 0;
          const std::uint64_t got = convert(to, *from, in, r, got_flags);
          const oracle::Expected want = oracle::convert(to, *from, in, mode);
          ++t.checked;
          if (got != want.bits || got_flags != want.flags) {
            ++failed;
            if (t.first_failures.size() < 12)
              t.first_failures.push_back(mismatch(*from, to, in, mode, false, want, got, got_flags));
          }
        }
        t.failed += failed;
      }
    }
  }
  CHECK(t.checked == 2u * 13u * 6u * 6000u);
  report(t);
}

TEST_CASE("the oracle itself agrees with hand-worked conversions", "[convert][mpfr]") {
  // Guards against an oracle that agrees with the core for the wrong reason.
  const Format& h = formats::binary16();
  const Format& e4 = format("e4m3");
  const auto conv = [&](const Format& to, double v, RoundingMode m) {
    oracle::Real x(64);
    mpfr_set_d(x, v, MPFR_RNDN);
    return oracle::round_exact(to, x, m);
  };
  // 1 + 2^-11 is the binary16 midpoint between 1 and 1 + 2^-10.
  CHECK(conv(h, 1.0 + 0x1p-11, RoundingMode::nearest_even).bits == 0x3C00);
  CHECK(conv(h, 1.0 + 0x1p-11, RoundingMode::nearest_away).bits == 0x3C01);
  CHECK(conv(h, 1.0 + 0x1p-12, RoundingMode::odd).bits == 0x3C01);
  CHECK(conv(h, 1.0 + 0x1p-12, RoundingMode::odd).flags == flag_inexact);
  // 65520 is halfway between 65504 and 2^16: RNE overflows to infinity.
  CHECK(conv(h, 65520.0, RoundingMode::nearest_even).bits == 0x7C00);
  CHECK(conv(h, 65520.0, RoundingMode::nearest_even).flags == (flag_overflow | flag_inexact));
  CHECK(conv(h, 65520.0, RoundingMode::toward_zero).bits == 0x7BFF);
  // The smallest subnormal 2^-24; half of it ties to 0 in RNE, with underflow.
  CHECK(conv(h, 0x1p-25, RoundingMode::nearest_even).bits == 0x0000);
  CHECK(conv(h, 0x1p-25, RoundingMode::nearest_even).flags == (flag_underflow | flag_inexact));
  CHECK(conv(h, -0x1p-25, RoundingMode::odd).bits == 0x8001);
  // E4M3FN: 464 ties to 448 (even), 465 overflows to NaN, RTZ saturates.
  CHECK(conv(e4, 464.0, RoundingMode::nearest_even).bits == 0x7E);
  CHECK(conv(e4, 465.0, RoundingMode::nearest_even).bits == 0x7F);
  CHECK(conv(e4, -1e6, RoundingMode::toward_zero).bits == 0xFE);
  // Tininess after rounding: 2^-14 * (1 - 2^-12) rounds up to the smallest normal.
  CHECK(conv(h, 0x1p-14 * (1 - 0x1p-12), RoundingMode::nearest_even).bits == 0x0400);
  CHECK(conv(h, 0x1p-14 * (1 - 0x1p-12), RoundingMode::nearest_even).flags == flag_inexact);
  // E8M0 has no zero: below 2^-127 becomes 2^-127 (encoding 0) or stays per mode.
  CHECK(conv(format("e8m0"), 3.0, RoundingMode::nearest_even).bits == 0x81);
  CHECK(conv(format("e8m0"), 3.0, RoundingMode::toward_zero).bits == 0x80);
  CHECK(conv(format("e8m0"), -1.0, RoundingMode::nearest_even).flags == flag_invalid);
}
