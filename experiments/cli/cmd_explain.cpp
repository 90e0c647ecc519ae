// rpsim explain VALUE --format F --rounding M: how one value rounds to a
// format: its exact binary64 value, the two representable neighbours (also
// when the value is itself representable), where it lies between them, the
// result in every rounding mode, the error in ulps, and the IEEE flags.
#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "commands.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/print.hpp"
#include "rpsim/formats/random.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim::cli {
namespace {

struct ParsedValue {
  double value;
  std::string note;  // why the binary64 differs from the text, if it visibly does
};

ParsedValue parse_value(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || *end != '\0' ||
      std::isspace(static_cast<unsigned char>(text[0])))
    throw UsageError(
        fmt::format("VALUE '{}' is not a number (decimal, hex float such as 0x1.8p-3, inf or nan)", text));
  ParsedValue p{v, {}};
  if (errno == ERANGE)
    p.note = std::isinf(v) ? "beyond binary64's range: read as infinity"
                           : "below binary64's normal range: read as the nearest subnormal or zero";
  return p;
}

// Every binary64 is a finite decimal: sig * 2^e = sig * 5^-e / 10^-e when
// e < 0. Printed in full (up to 767 significant digits for subnormals).
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
    digits.insert(0, std::size_t(fraction_digits) - digits.size() + 1, '0');
  digits.insert(digits.size() - std::size_t(fraction_digits), ".");
  return sign + digits;  // sig is odd, so the last digit (a 5) is significant
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

void print_encoding(const Format& f, const char* label, std::uint64_t bits) {
  fmt::print("  {:<8} {:<24} {:<8} [{}]  {}\n", label, decimal(f, bits), hex_bits(f, bits),
             binary_fields(f, bits), classify(f, bits));
}

// The representable values nearest to v strictly below and strictly above it
// (the RD and RU results of v -/+ an infinitesimal), or none where the format
// ends. v is finite.
struct Neighbours {
  std::optional<std::uint64_t> below, above;
};

Neighbours strict_neighbours(const Format& f, double v) {
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
  Neighbours n;
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
  if (!is_nan(f, below) && to_double(f, below) < v) n.below = below;
  if (!is_nan(f, above) && to_double(f, above) > v) n.above = above;
  return n;
}

int explain(const std::string& value_text, const std::string& format_name, const std::string& mode_name,
            std::uint64_t seed) {
  const Format& f = format(format_name);
  Rounding r;
  r.mode = parse_rounding(mode_name);
  if (r.mode == RoundingMode::stochastic) r.random_bits = counter_random(seed, 0, 0);
  const ParsedValue parsed = parse_value(value_text);
  const double v = parsed.value;
  std::uint64_t v_bits;
  std::memcpy(&v_bits, &v, 8);

  fmt::print("value        {}\n", value_text);
  fmt::print("binary64     {} (0x{:016X}, the nearest binary64 to the text)\n", exact_decimal(v), v_bits);
  if (!parsed.note.empty()) fmt::print("note         {}\n", parsed.note);
  fmt::print(
      "format       {}: {} bits = {} sign + {} exponent + {} fraction; precision {}, bias {}, emin {}, emax "
      "{}\n",
      f.name, f.bits, int(f.has_sign), f.exp_bits, f.man_bits, f.precision(), f.bias, f.emin, f.emax);
  fmt::print("             max {}, min normal {}, min subnormal {}, {}\n", f.max_finite(), f.min_normal(),
             f.min_positive(),
             f.has_inf()   ? "infinities and NaNs"
             : f.has_nan() ? "no infinities (overflow default: " +
                                 std::string(f.overflow == Overflow::nan ? "NaN" : "saturate") + ")"
                           : "no infinities or NaNs (overflow saturates)");

  Flags fl = 0;
  const std::uint64_t rounded = round_double(f, v, r, fl);
  Flags exactness = 0;
  const bool representable = std::isfinite(v) && (round_double(f, v, Rounding{}, exactness), exactness == 0);

  std::optional<double> spacing, position;
  if (std::isfinite(v)) {
    const Neighbours n = strict_neighbours(f, v);
    if (n.below && n.above && !representable) {
      spacing = to_double(f, *n.above) - to_double(f, *n.below);
      position = (v - to_double(f, *n.below)) / *spacing;
    }
    if (representable)
      fmt::print("neighbours   (the value is representable: {}; its neighbours are)\n", hex_bits(f, rounded));
    else if (position)
      fmt::print("neighbours   (the value lies {:.6g} of the way from below to above; spacing {:.17g})\n",
                 *position, *spacing);
    else
      fmt::print("neighbours   (the value lies beyond the format's finite range)\n");
    if (n.below)
      print_encoding(f, "below", *n.below);
    else
      fmt::print("  below    none (no finite value below)\n");
    if (n.above)
      print_encoding(f, "above", *n.above);
    else
      fmt::print("  above    none (no finite value above)\n");
  }

  fmt::print("rounded ({}{})\n", rounding_name(r.mode),
             r.mode == RoundingMode::stochastic ? fmt::format(", one draw of seed {}", seed) : "");
  print_encoding(f, "result", rounded);
  const double got = to_double(f, rounded);
  if (!is_nan(f, rounded)) fmt::print("exact        {}\n", exact_decimal(got));
  if (std::isfinite(v) && std::isfinite(got)) {
    const double abs_err = got - v;
    fmt::print("abs error    {:.17g}\n", abs_err);
    if (v != 0)
      fmt::print("rel error    {:.17g} (unit roundoff u = 2^-{} = {:.6g})\n", abs_err / std::fabs(v),
                 f.precision(), std::ldexp(1.0, -f.precision()));
    // The ulp of the interval that holds v (the spacing of its neighbours);
    // for a representable value, the spacing of its binade.
    const int e = v == 0 ? f.emin : std::max(std::ilogb(v), f.emin);
    const double ulp = spacing.value_or(std::ldexp(1.0, e - f.man_bits));
    fmt::print("ulp          {:.17g} (error = {:.6g} ulp)\n", ulp, abs_err / ulp);
  }
  if (position && r.mode == RoundingMode::stochastic) {
    // round.cpp compares the discarded fraction, truncated to k bits, with k random bits.
    const double magnitude_position = v < 0 ? 1 - *position : *position;
    const double p =
        std::floor(std::ldexp(magnitude_position, r.stochastic_bits)) / std::ldexp(1.0, r.stochastic_bits);
    fmt::print("sr           P(away from zero) = {:.9g} (the fractional position truncated to {} bits)\n", p,
               r.stochastic_bits);
  }
  fmt::print("flags        {}\n", flag_names(fl));
  fmt::print("subnormal    {}\noverflowed   {}\nunderflowed  {}\n",
             classify(f, rounded) == "subnormal" ? "yes" : "no",
             fl & flag_overflow ? "yes, to " + classify(f, rounded) : std::string("no"),
             fl & flag_underflow ? "yes" : "no");

  fmt::print("all modes   ");
  for (RoundingMode m : {RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero,
                         RoundingMode::down, RoundingMode::up, RoundingMode::odd}) {
    Rounding rm = r;
    rm.mode = m;
    Flags ignore = 0;
    fmt::print(" {} {}", rounding_name(m), hex_bits(f, round_double(f, v, rm, ignore)));
  }
  fmt::print("\n");
  return 0;
}

void add_explain(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("explain", "Show how a value rounds to a format");
  auto value = std::make_shared<std::string>();
  auto fmt_name = std::make_shared<std::string>("binary16");
  auto mode = std::make_shared<std::string>("rne");
  auto seed = std::make_shared<std::uint64_t>(0);
  cmd->add_option("VALUE", *value, "a decimal or hex-float number, inf or nan")->required();
  cmd->add_option("-f,--format", *fmt_name,
                  "format name or spec (binary16, bf16, e4m3, e5m10, exp=5,man=10, ...)")
      ->capture_default_str();
  cmd->add_option("-r,--rounding", *mode, rounding_names())->capture_default_str();
  cmd->add_option("--seed", *seed, "sr: the draw is counter_random(seed, 0, 0)")->capture_default_str();
  cmd->callback([=, &action] { action = [=] { return explain(*value, *fmt_name, *mode, *seed); }; });
}

const Registrar registered("explain", add_explain);
}  // namespace

}  // namespace rpsim::cli
