// The facts of `rpsim explain` / `rpsim.explain`: the exact binary64, the two
// representable neighbours, where the value lies between them, the result,
// its error in ulps and the IEEE flags.
#include "rpsim/formats/explain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rpsim/formats/random.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim {

ParsedNumber parse_number(std::string_view text) {
  const std::string s(text);
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || *end != '\0' || std::isspace(static_cast<unsigned char>(s[0])))
    throw FormatError(
        fmt::format("VALUE '{}' is not a number (decimal, hex float such as 0x1.8p-3, inf or nan)", s));
  ParsedNumber p{v, {}};
  if (errno == ERANGE)
    p.note = std::isinf(v) ? "beyond binary64's range: read as infinity"
                           : "below binary64's normal range: read as the nearest subnormal or zero";
  return p;
}

std::string exact_decimal(double v) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  const std::string sign = std::signbit(v) ? "-" : "";
  if (v == 0) return sign + "0";
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);
  std::uint64_t sig = std::uint64_t(std::ldexp(m, 53));  // |v| = sig * 2^(e-53), exactly
  e -= 53;
  while ((sig & 1) == 0) {
    sig >>= 1;
    ++e;
  }
  // A non-negative integer in base 10^9, least significant limb first.
  std::vector<std::uint32_t> limbs;
  for (std::uint64_t s = sig; s != 0; s /= 1000000000u) limbs.push_back(std::uint32_t(s % 1000000000u));
  auto multiply = [&limbs](std::uint32_t k) {
    std::uint64_t carry = 0;
    for (auto& limb : limbs) {
      const std::uint64_t t = std::uint64_t(limb) * k + carry;
      limb = std::uint32_t(t % 1000000000u);
      carry = t / 1000000000u;
    }
    if (carry) limbs.push_back(std::uint32_t(carry));
  };
  const int fraction_digits = e < 0 ? -e : 0;
  for (int i = 0; i < std::abs(e); ++i) multiply(e < 0 ? 5 : 2);
  std::string digits = std::to_string(limbs.back());
  for (std::size_t i = limbs.size() - 1; i-- > 0;) digits += fmt::format("{:09}", limbs[i]);
  if (fraction_digits == 0) return sign + digits;
  if (int(digits.size()) <= fraction_digits)
    digits = std::string(std::size_t(fraction_digits) - digits.size() + 1, '0') + digits;
  // Concatenation, not insert(): GCC 12 warns (-Wrestrict) about insert's
  // inlined memcpy here, a known false positive.
  const std::size_t point = digits.size() - std::size_t(fraction_digits);
  return sign + digits.substr(0, point) + "." + digits.substr(point);  // the last digit (a 5) is significant
}

std::string flag_names(Flags fl) {
  if (fl == 0) return "none (exact)";
  std::string s;
  for (auto [bit, name] : {std::pair{flag_inexact, "inexact"}, std::pair{flag_underflow, "underflow"},
                           std::pair{flag_overflow, "overflow"}, std::pair{flag_infinite, "infinite"},
                           std::pair{flag_invalid, "invalid"}})
    if (fl & bit) s += s.empty() ? name : std::string(" ") + name;
  return s;
}

namespace {

// The representable values nearest to v strictly below and strictly above it
// (the RD and RU results of v -/+ an infinitesimal), or none where the format
// ends. v is finite.
void strict_neighbours(const Format& f, double v, Explanation& x) {
  Rounding down, up;
  down.mode = RoundingMode::down;
  up.mode = RoundingMode::up;
  down.overflow = up.overflow = Overflow::saturate;  // the end of the format: detected below
  Flags ignore = 0;
  std::uint64_t b64;
  std::memcpy(&b64, &v, 8);
  const Unpacked u = unpack(formats::binary64(), b64);
  // |v| + tiny and |v| - tiny, as (significand, exponent, sticky).
  const u128 sig = u128(u.cls == Class::zero ? 0 : u.significand) << 60;
  const std::int64_t exp = u.exponent - 60;
  auto magnitude_plus = [&](const Rounding& r, bool sign) {
    return round_pack(f, sign, exp, sig, true, r, ignore);
  };
  auto magnitude_minus = [&](const Rounding& r, bool sign) {
    return round_pack(f, sign, exp, sig - 1, true, r, ignore);
  };
  std::uint64_t below, above;
  if (v == 0) {
    below = round_pack(f, true, 0, 0, true, down, ignore);
    above = round_pack(f, false, 0, 0, true, up, ignore);
  } else if (!u.sign) {
    below = magnitude_minus(down, false);
    above = magnitude_plus(up, false);
  } else {
    below = magnitude_plus(down, true);
    above = magnitude_minus(up, true);
  }
  if (!is_nan(f, below) && to_double(f, below) < v) x.below = below;
  if (!is_nan(f, above) && to_double(f, above) > v) x.above = above;
  if (x.below && x.above && !x.representable) {
    x.spacing = to_double(f, *x.above) - to_double(f, *x.below);
    x.position = (v - to_double(f, *x.below)) / *x.spacing;
  }
}

void errors(const Format& f, double v, Explanation& x) {
  x.abs_error = x.result_value - v;
  if (v != 0) x.rel_error = *x.abs_error / std::fabs(v);
  const int e = v == 0 ? f.emin : std::max(std::ilogb(v), f.emin);
  // Fixed point has one grid step everywhere; a float, its binade's spacing.
  x.ulp = x.spacing.value_or(f.is_fixed_point() ? f.min_positive() : std::ldexp(1.0, e - f.man_bits));
  x.error_ulps = *x.abs_error / *x.ulp;
  if (x.position && x.mode == RoundingMode::stochastic) {
    // round.cpp compares the discarded fraction, truncated to k bits, with k random bits.
    const double magnitude_position = v < 0 ? 1 - *x.position : *x.position;
    x.sr_probability_away =
        std::floor(std::ldexp(magnitude_position, x.stochastic_bits)) / std::ldexp(1.0, x.stochastic_bits);
  }
}

}  // namespace

Explanation explain(const Format& f, double value, RoundingMode mode, std::uint64_t seed) {
  Explanation x;
  x.format = f;
  x.value = value;
  x.mode = mode;
  x.seed = seed;
  Rounding r;
  r.mode = mode;
  if (mode == RoundingMode::stochastic) r.random_bits = counter_random(seed, 0, 0);
  x.stochastic_bits = r.stochastic_bits;
  x.result = round_double(f, value, r, x.flags);
  x.result_value = to_double(f, x.result);
  x.unit_roundoff = std::ldexp(1.0, -f.precision());
  x.finite = std::isfinite(value);
  Flags exactness = 0;
  x.representable = x.finite && (round_double(f, value, Rounding{}, exactness), exactness == 0);
  if (x.finite) strict_neighbours(f, value, x);
  if (x.finite && std::isfinite(x.result_value)) errors(f, value, x);
  const RoundingMode modes[] = {RoundingMode::nearest_even, RoundingMode::nearest_away,
                                RoundingMode::toward_zero,  RoundingMode::down,
                                RoundingMode::up,           RoundingMode::odd};
  for (std::size_t i = 0; i < x.all_modes.size(); ++i) {
    Rounding rm = r;
    rm.mode = modes[i];
    Flags ignore = 0;
    x.all_modes[i] = {modes[i], round_double(f, value, rm, ignore)};
  }
  return x;
}

}  // namespace rpsim
