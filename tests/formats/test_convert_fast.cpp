// convert()'s integer fast path (convert_paths.hpp) against the general
// unpack + round_pack path on random bit patterns: the same bits and the
// same flags for every format pair, mode and option, whether or not the
// fast path takes the case. The inputs cluster around the destination's
// exponent range (subnormals, overflow, the normal/subnormal boundary) and
// have their low bits cleared at random so that ties and exact results occur.
#include <catch2/catch.hpp>

#include <array>
#include <sstream>
#include <string>

#include "rpsim/formats/convert_paths.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"

using namespace rpsim;

namespace {

constexpr std::array<const char*, 5> kSources = {"binary64", "binary32", "tf32", "binary16", "bfloat16"};
// The named formats, and IEEE-like rows of odd widths and biases.
constexpr std::array<const char*, 16> kTargets = {"binary64",
                                                  "binary32",
                                                  "tf32",
                                                  "binary16",
                                                  "bfloat16",
                                                  "e5m2",
                                                  "e4m3",
                                                  "e4m3fnuz",
                                                  "e5m2fnuz",
                                                  "e3m2",
                                                  "e2m3",
                                                  "e2m1",
                                                  "e8m0",
                                                  "e6m4",
                                                  "exp=4,man=1,bias=2",
                                                  "e5m2,overflow=saturate"};
constexpr std::array<RoundingMode, 7> kModes = {
    RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero, RoundingMode::down,
    RoundingMode::up,           RoundingMode::odd,          RoundingMode::stochastic};

Format target(const char* spec) {
  const std::string s = spec;
  if (s == "e5m2,overflow=saturate") return parse_format("exp=5,man=2,bias=15,overflow=saturate");
  return parse_format(s);
}

// A random encoding of `from`: every fourth one uniform, the others with an
// exponent within the destination's range widened by its precision and a few
// binades, and a random number of low fraction bits cleared.
std::uint64_t sample(const Format& from, const Format& to, std::uint64_t i) {
  const std::uint64_t r0 = counter_random(30, 1, i), r1 = counter_random(30, 2, i);
  std::uint64_t bits = r0 & from.bit_mask();
  if (i % 4 == 0) return bits;
  const std::int64_t lo = to.emin - to.man_bits - 3, hi = to.emax + 3;
  std::int64_t e = lo + std::int64_t(r1 % std::uint64_t(hi - lo + 1)) + from.bias;
  e = std::clamp<std::int64_t>(e, 0, std::int64_t(from.exp_field_max()));
  std::uint64_t man = bits & from.man_mask();
  const int clear = int((r1 >> 32) % std::uint64_t(from.man_bits + 1));
  if ((r1 >> 40) & 1) man &= ~((std::uint64_t(1) << clear) - 1);
  if ((r1 >> 41) & 1 && clear > 0) man |= std::uint64_t(1) << (clear - 1);  // a tie at some place
  return (bits & from.sign_bit()) | (std::uint64_t(e) << from.man_bits) | man;
}

}  // namespace

TEST_CASE("convert's fast path gives the general path's bits and flags", "[convert]") {
  constexpr std::uint64_t kPerCase = 3000;
  std::uint64_t checked = 0, fast_taken = 0, failed = 0;
  std::string first;
  for (const char* src : kSources) {
    const Format& from = format(src);
    for (const char* dst : kTargets) {
      const Format to = target(dst);
      for (RoundingMode mode : kModes) {
        for (int option = 0; option < 6; ++option) {
          Rounding r;
          r.mode = mode;
          r.flush_subnormal_inputs = option == 1;
          r.flush_subnormal_outputs = option == 2;
          if (option == 3) r.overflow = Overflow::saturate;
          if (option == 4) r.overflow = Overflow::nan;
          if (option == 5) r.overflow = Overflow::infinity;
          for (std::uint64_t i = 0; i < kPerCase; ++i) {
            const std::uint64_t x = sample(from, to, i);
            r.random_bits = counter_random(31, 0, i);
            Flags fast_flags = 0, general_flags = 0, probe = 0;
            const std::uint64_t got = convert(to, from, x, r, fast_flags);
            const std::uint64_t want = convert_general(to, from, x, r, general_flags);
            fast_taken += convert_fast(to, from, x, r, probe).has_value();
            ++checked;
            if (got == want && fast_flags == general_flags) continue;
            if (failed++ == 0) {
              std::ostringstream s;
              s << src << " 0x" << std::hex << x << " -> " << dst << " " << rounding_name(mode) << " option "
                << option << ": fast 0x" << got << " flags 0x" << int(fast_flags) << ", general 0x" << want
                << " flags 0x" << int(general_flags);
              first = s.str();
            }
          }
        }
      }
    }
  }
  INFO(failed << " of " << checked << " differ; first: " << first);
  CHECK(failed == 0);
  // The comparison proves something only if the fast path ran on most pairs.
  INFO(fast_taken << " of " << checked << " took the fast path");
  CHECK(fast_taken > checked / 10);
}

TEST_CASE("convert's fast path takes the IEEE-like narrowing cases only", "[convert]") {
  Rounding rne, sr, ftz;
  sr.mode = RoundingMode::stochastic;
  ftz.flush_subnormal_outputs = true;
  const Format& f64 = formats::binary64();
  const Format& f32 = formats::binary32();
  CHECK(convert_fast_applies(formats::binary16(), f32, rne));
  CHECK(convert_fast_applies(formats::bfloat16(), f64, rne));
  CHECK(convert_fast_applies(formats::e5m2(), f32, rne));
  CHECK_FALSE(convert_fast_applies(formats::e4m3(), f32, rne));  // NaN is all ones, no infinity
  CHECK_FALSE(convert_fast_applies(f64, f32, rne));              // widening: no rounding to do
  CHECK_FALSE(convert_fast_applies(formats::binary16(), f32, sr));
  CHECK_FALSE(convert_fast_applies(formats::binary16(), f32, ftz));
  CHECK_FALSE(convert_fast_applies(parse_format("q16.14"), f32, rne));
  Flags fl = 0;
  CHECK_FALSE(convert_fast(formats::binary16(), f32, 0x7FC00000u, rne, fl).has_value());  // NaN
  CHECK_FALSE(convert_fast(formats::binary16(), f32, 0x00000001u, rne, fl).has_value());  // subnormal
  REQUIRE(convert_fast(formats::binary16(), f32, 0x3F800000u, rne, fl).has_value());
  CHECK(*convert_fast(formats::binary16(), f32, 0x3F800000u, rne, fl) == 0x3C00u);
}
