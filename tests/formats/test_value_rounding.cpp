// ValueRounding (round_values prepared once) against the scalar core, one
// value at a time and in spans, for every format, mode and option variant;
// the exact paths it shares with round_values (the identity for binary64, the
// binary32 conversion instruction) and their guards.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "array_reference.hpp"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

using namespace rpsim;
using namespace rpsim::array_test;

namespace {

// The decoded reference: round_double then back to binary64.
std::vector<std::uint64_t> reference_values(const Format& fmt, const std::vector<double>& in,
                                            const ArrayOptions& o) {
  const auto bits = reference_bits(fmt, in, o);
  std::vector<std::uint64_t> out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    Flags f = 0;
    out[i] = convert(formats::binary64(), fmt, bits[i], Rounding{}, f);
  }
  return out;
}

// One value at a time (element i at index i), a whole span, and a span in
// two pieces told where the second starts: each the reference's bits.
void check_value_rounding(const Format& fmt, const std::vector<double>& in, const ArrayOptions& o) {
  INFO(describe(fmt, o));
  const auto want = reference_values(fmt, in, o);
  const ValueRounding round(fmt, o);
  std::string first;
  std::vector<double> one(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) one[i] = round(in[i], i);
  std::size_t bad = count_mismatches(in, one, want, first);
  INFO("one at a time: " << first);
  CHECK(bad == 0);
  std::vector<double> span = in;
  round(std::span<const double>(span), std::span<double>(span));
  bad = count_mismatches(in, span, want, first);
  INFO("span in place: " << first);
  CHECK(bad == 0);
  std::vector<double> pieces(in.size());
  const std::size_t cut = in.size() / 3;
  round(std::span<const double>(in).first(cut), std::span<double>(pieces).first(cut));
  round(std::span<const double>(in).subspan(cut), std::span<double>(pieces).subspan(cut), cut);
  bad = count_mismatches(in, pieces, want, first);
  INFO("two pieces: " << first);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("ValueRounding equals the scalar core, one value at a time and in spans", "[array]") {
  for (const char* name : tested_formats) {
    const Format fmt = parse_format(name);
    auto in = random_inputs(fmt, 6000, 21);
    const auto specials = special_values(fmt);
    in.insert(in.end(), specials.begin(), specials.end());
    for (RoundingMode mode : all_modes)
      for (const ArrayOptions& o : rounding_variants(mode)) check_value_rounding(fmt, in, o);
  }
  // binary64 itself: the identity path (NaNs quieted by the scalar core,
  // subnormals flushed under FTZ and DAZ).
  const auto in = random_inputs(formats::binary64(), 20000, 22);
  for (RoundingMode mode : all_modes)
    for (const ArrayOptions& o : rounding_variants(mode)) check_value_rounding(formats::binary64(), in, o);
}

TEST_CASE("the identity and binary32 paths: exact, and only where they apply", "[array]") {
  // A signalling NaN is quieted by the scalar core, not copied.
  const double snan = std::bit_cast<double>(0x7FF0000000000001ull);
  const ValueRounding b64(formats::binary64());
  CHECK(std::bit_cast<std::uint64_t>(b64(snan)) == 0x7FF8000000000001ull);
  CHECK(b64(0.1) == 0.1);
  CHECK(b64(-std::numeric_limits<double>::denorm_min()) == -std::numeric_limits<double>::denorm_min());
  ArrayOptions ftz;
  ftz.rounding.flush_subnormal_outputs = true;
  const ValueRounding b64_ftz(formats::binary64(), ftz);
  CHECK(std::bit_cast<std::uint64_t>(b64_ftz(-std::numeric_limits<double>::denorm_min())) == 1ull << 63);

  const ValueRounding b32(formats::binary32());
  CHECK(b32(0.1) == double(0.1f));
  CHECK(b32(1e39) == std::numeric_limits<double>::infinity());
  CHECK(b32(0x1.000001p-149) == 0x1p-149);  // subnormal result kept, above half rounds up
  CHECK(b32(0x1p-150) == 0.0);              // the tie rounds to even (zero)
  ArrayOptions saturate;
  saturate.rounding.overflow = Overflow::saturate;
  CHECK(ValueRounding(formats::binary32(), saturate)(1e39) == double(std::numeric_limits<float>::max()));

#if defined(__x86_64__)
  // MXCSR rounding toward zero: the conversion instruction would truncate,
  // so neither round_values nor a ValueRounding made now may use it.
  const unsigned saved = _mm_getcsr();
  _mm_setcsr((saved & ~0x6000u) | 0x6000u);
  const double x = 1.0 + 0x1.8p-24;  // RNE gives 1 + 2^-23, truncation 1
  const ValueRounding under_rz(formats::binary32());
  const double from_value_rounding = under_rz(x);
  std::vector<double> v{x, -x};
  round_values(formats::binary32(), std::span<const double>(v), std::span<double>(v));
  _mm_setcsr(saved);
  CHECK(from_value_rounding == 1.0 + 0x1p-23);
  CHECK(v[0] == 1.0 + 0x1p-23);
  CHECK(v[1] == -(1.0 + 0x1p-23));
#endif
}

TEST_CASE("ValueRounding rejects bad options and mismatched spans, naming itself", "[array]") {
  ArrayOptions bad;
  bad.threads = -2;
  CHECK_THROWS_WITH(ValueRounding(formats::binary16(), bad), Catch::Contains("ValueRounding(binary16"));
  const ValueRounding r(formats::bfloat16());
  std::vector<double> in(4, 1.0), out(3);
  CHECK_THROWS_WITH(r(std::span<const double>(in), std::span<double>(out)),
                    Catch::Contains("4 elements, output 3"));
}
