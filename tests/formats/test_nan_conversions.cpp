// The NaN rule of conversions into wider formats (issue #19): every encoding
// of every format of at most 8 bits, converted to every wider IEEE format
// under each NaN policy, against the rule stated here bit by bit (nothing
// below calls rpsim's decoding or NaN code to find the expected bits):
//   x86_sse, arm: sign | all-ones exponent | quiet bit | payload, where the
//     payload is the source NaN's fraction below its top bit, left-aligned
//     under the target's quiet bit (x86 CVT* and SoftFloat's common-NaN
//     conversions; for OCP E4M3's S.1111.111 the payload is 11, so 0x7F ->
//     binary32 0x7FF00000); the fnuz formats' single NaN (the -0 pattern)
//     and E8M0's 0xFF have no fraction payload and give the positive /
//     unsigned quiet NaN;
//   riscv: the canonical NaN (positive, quiet bit only) whatever the input.
// Non-NaN encodings must convert exactly (every such value fits).
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "mpfr_oracle.hpp"
#include "rpsim/formats/ops.hpp"

using namespace rpsim;

namespace {

struct Small {
  const char* name;
  int bits, exp_bits, man_bits;
  // Which encodings are NaN, from the OCP FP8 / MX specs' tables.
  bool (*is_nan)(std::uint64_t b);
  bool nan_signed;  // false: the NaN has no sign (fnuz, unsigned E8M0)
};

const std::vector<Small>& smalls() {
  static const std::vector<Small> s{
      {"e4m3", 8, 4, 3, [](std::uint64_t b) { return (b & 0x7F) == 0x7F; }, true},
      {"e5m2", 8, 5, 2, [](std::uint64_t b) { return (b & 0x7C) == 0x7C && (b & 0x03) != 0; }, true},
      {"e4m3fnuz", 8, 4, 3, [](std::uint64_t b) { return b == 0x80; }, false},
      {"e5m2fnuz", 8, 5, 2, [](std::uint64_t b) { return b == 0x80; }, false},
      {"e8m0", 8, 8, 0, [](std::uint64_t b) { return b == 0xFF; }, false},
      {"e3m2", 6, 3, 2, [](std::uint64_t) { return false; }, true},
      {"e2m3", 6, 2, 3, [](std::uint64_t) { return false; }, true},
      {"e2m1", 4, 2, 1, [](std::uint64_t) { return false; }, true},
  };
  return s;
}

struct Wide {
  const char* name;
  int bits, exp_bits, man_bits;
};
constexpr Wide kWide[] = {{"binary16", 16, 5, 10},
                          {"bfloat16", 16, 8, 7},
                          {"tf32", 19, 8, 10},
                          {"binary32", 32, 8, 23},
                          {"binary64", 64, 11, 52}};

std::uint64_t expected_nan(const Small& s, const Wide& w, std::uint64_t b, NanPolicy policy) {
  const std::uint64_t exp_all_ones = ((std::uint64_t(1) << w.exp_bits) - 1) << w.man_bits;
  const std::uint64_t quiet = std::uint64_t(1) << (w.man_bits - 1);
  if (policy == NanPolicy::riscv) return exp_all_ones | quiet;
  const bool negative = s.nan_signed && ((b >> (s.bits - 1)) & 1);
  std::uint64_t payload = 0;
  if (s.nan_signed && s.man_bits > 1) {
    payload = b & ((std::uint64_t(1) << (s.man_bits - 1)) - 1);  // fraction below its top bit
    payload <<= (w.man_bits - 1) - (s.man_bits - 1);
  }
  return (negative ? std::uint64_t(1) << (w.bits - 1) : 0) | exp_all_ones | quiet | payload;
}

std::string hex(std::uint64_t v) {
  std::ostringstream o;
  o << "0x" << std::hex << v;
  return o.str();
}

}  // namespace

TEST_CASE("every FP8/FP6/FP4/E8M0 encoding widens to every IEEE format by the stated NaN rule",
          "[convert][nan]") {
  std::size_t nans = 0, checked = 0;
  for (const Small& s : smalls()) {
    const Format& from = format(s.name);
    for (const Wide& w : kWide) {
      const Format& to = format(w.name);
      for (const NanPolicy policy : {NanPolicy::x86_sse, NanPolicy::arm, NanPolicy::riscv}) {
        Rounding r;
        r.nan_policy = policy;
        for (std::uint64_t b = 0; b < (std::uint64_t(1) << s.bits); ++b) {
          Flags flags = 0;
          const std::uint64_t got = convert(to, from, b, r, flags);
          ++checked;
          if (s.is_nan(b)) {
            ++nans;
            INFO(s.name << " " << hex(b) << " -> " << w.name << " policy " << int(policy));
            REQUIRE(hex(got) == hex(expected_nan(s, w, b, policy)));
            // Only a signalling NaN (E5M2's with the top fraction bit clear) raises invalid.
            const bool signalling = std::string(s.name) == "e5m2" && !((b >> 1) & 1);
            CHECK(flags == (signalling ? flag_invalid : 0));
          } else {
            // Non-NaN values: the independent MPFR oracle gives bits and flags
            // (exact, but for E8M0's range beyond binary16's).
            const auto want = oracle::convert(to, from, b, RoundingMode::nearest_even);
            INFO(s.name << " " << hex(b) << " -> " << w.name);
            REQUIRE(hex(got) == hex(want.bits));
            CHECK(flags == want.flags);
          }
        }
      }
    }
  }
  CHECK(nans == 3 * 5 * (2 + 6 + 1 + 1 + 1));  // E4M3 2, E5M2 6, fnuz 1 each, E8M0 1 per policy x target
  CHECK(checked > 10000);
}

TEST_CASE("the FP8 NaN rule on the issue's examples", "[convert][nan]") {
  Rounding x86;
  Flags f = 0;
  CHECK(convert(formats::binary32(), formats::e4m3(), 0x7F, x86, f) == 0x7FF00000);
  CHECK(convert(formats::binary32(), formats::e4m3(), 0xFF, x86, f) == 0xFFF00000);
  // The rule the IEEE formats already followed: binary16 0x7E01 -> 0x7FC02000.
  CHECK(convert(formats::binary32(), formats::binary16(), 0x7E01, x86, f) == 0x7FC02000);
  CHECK(convert(formats::binary16(), formats::e4m3(), 0x7F, x86, f) == 0x7F80);
  CHECK(convert(formats::binary32(), formats::e5m2(), 0x7E, x86, f) == 0x7FC00000);  // quiet, payload 0
  CHECK(convert(formats::binary32(), formats::e5m2(), 0xFD, x86, f) == 0xFFE00000);  // signalling, payload 1
  CHECK(convert(formats::binary32(), format("e8m0"), 0xFF, x86, f) == 0x7FC00000);
  Rounding riscv;
  riscv.nan_policy = NanPolicy::riscv;
  CHECK(convert(formats::binary32(), formats::e4m3(), 0xFF, riscv, f) == 0x7FC00000);
}
