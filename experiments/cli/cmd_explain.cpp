// rpsim explain VALUE --format F --rounding M: how one value rounds to a
// format: its exact binary64 value, the two representable neighbours (also
// when the value is itself representable), where it lies between them, the
// result in every rounding mode, the error in ulps, and the IEEE flags. The
// facts come from rpsim::explain (formats/explain.hpp), which the Python
// module returns as a dict; this file only prints them.
#include <fmt/format.h>

#include <cstring>

#include "commands.hpp"
#include "rpsim/formats/explain.hpp"
#include "rpsim/formats/print.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim::cli {
namespace {

void print_encoding(const Format& f, const char* label, std::uint64_t bits) {
  fmt::print("  {:<8} {:<24} {:<8} [{}]  {}\n", label, decimal(f, bits), hex_bits(f, bits),
             binary_fields(f, bits), classify(f, bits));
}

// The format's row: fields, range and what happens beyond it.
void print_format(const Format& f) {
  if (f.is_fixed_point()) {
    fmt::print(
        "format       {}: {}-bit signed fixed point (two's complement), {} fraction bits, {} integer bits "
        "(sign included)\n",
        f.name, f.bits, f.frac_bits, f.bits - f.frac_bits);
    fmt::print("             step 2^-{} = {}, range [{}, {}], saturating, no infinities or NaNs\n",
               f.frac_bits, f.min_positive(), f.lowest(), f.max_finite());
    return;
  }
  fmt::print(
      "format       {}: {} bits = {} sign + {} exponent + {} fraction; precision {}, bias {}, emin {}, emax "
      "{}\n",
      f.name, f.bits, int(f.has_sign), f.exp_bits, f.man_bits, f.precision(), f.bias, f.emin, f.emax);
  // Without subnormals the smallest positive value is the smallest normal.
  const std::string tiny = f.subnormals ? fmt::format("min subnormal {}", f.min_positive())
                                        : std::string("no subnormals (flushed to zero or the min normal)");
  fmt::print("             max {}, min normal {}, {}, {}\n", f.max_finite(), f.min_normal(), tiny,
             f.has_inf()   ? "infinities and NaNs"
             : f.has_nan() ? "no infinities (overflow default: " +
                                 std::string(f.overflow == Overflow::nan ? "NaN" : "saturate") + ")"
                           : "no infinities or NaNs (overflow saturates)");
}

void print_neighbours(const Explanation& x) {
  const Format& f = x.format;
  if (x.representable)
    fmt::print("neighbours   (the value is representable: {}; its neighbours are)\n", hex_bits(f, x.result));
  else if (x.position)
    fmt::print("neighbours   (the value lies {:.6g} of the way from below to above; spacing {:.17g})\n",
               *x.position, *x.spacing);
  else
    fmt::print("neighbours   (the value lies beyond the format's finite range)\n");
  if (x.below)
    print_encoding(f, "below", *x.below);
  else
    fmt::print("  below    none (no finite value below)\n");
  if (x.above)
    print_encoding(f, "above", *x.above);
  else
    fmt::print("  above    none (no finite value above)\n");
}

void print_result(const Explanation& x) {
  const Format& f = x.format;
  fmt::print("rounded ({}{})\n", rounding_name(x.mode),
             x.mode == RoundingMode::stochastic ? fmt::format(", one draw of seed {}", x.seed) : "");
  print_encoding(f, "result", x.result);
  if (!is_nan(f, x.result)) fmt::print("exact        {}\n", exact_decimal(x.result_value));
  if (x.abs_error) {
    fmt::print("abs error    {:.17g}\n", *x.abs_error);
    if (x.rel_error && f.is_fixed_point())
      fmt::print("rel error    {:.17g} (fixed point: the absolute error is at most one step, 2^-{})\n",
                 *x.rel_error, f.frac_bits);
    else if (x.rel_error)
      fmt::print("rel error    {:.17g} (unit roundoff u = 2^-{} = {:.6g})\n", *x.rel_error, f.precision(),
                 x.unit_roundoff);
    fmt::print("ulp          {:.17g} (error = {:.6g} ulp)\n", *x.ulp, *x.error_ulps);
  }
  if (x.sr_probability_away)
    fmt::print("sr           P(away from zero) = {:.9g} (the fractional position truncated to {} bits)\n",
               *x.sr_probability_away, x.stochastic_bits);
  fmt::print("flags        {}\n", flag_names(x.flags));
  fmt::print("subnormal    {}\noverflowed   {}\nunderflowed  {}\n",
             classify(f, x.result) == "subnormal" ? "yes" : "no",
             x.flags & flag_overflow ? "yes, to " + classify(f, x.result) : std::string("no"),
             x.flags & flag_underflow ? "yes" : "no");
  fmt::print("all modes   ");
  for (const auto& [mode, bits] : x.all_modes) fmt::print(" {} {}", rounding_name(mode), hex_bits(f, bits));
  fmt::print("\n");
}

int explain_value(const std::string& value_text, const std::string& format_name, const std::string& mode_name,
                  std::uint64_t seed) {
  const Format& f = format(format_name);
  const RoundingMode mode = parse_rounding(mode_name);
  const ParsedNumber parsed = parse_number(value_text);
  const Explanation x = explain(f, parsed.value, mode, seed);
  std::uint64_t v_bits;
  std::memcpy(&v_bits, &x.value, 8);
  fmt::print("value        {}\n", value_text);
  fmt::print("binary64     {} (0x{:016X}, the nearest binary64 to the text)\n", exact_decimal(x.value),
             v_bits);
  if (!parsed.note.empty()) fmt::print("note         {}\n", parsed.note);
  print_format(f);
  if (x.finite) print_neighbours(x);
  print_result(x);
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
                  "format name or spec (binary16, bf16, e4m3, e5m10, exp=5,man=10, q16.14 fixed point, ...)")
      ->capture_default_str();
  cmd->add_option("-r,--rounding", *mode, rounding_names())->capture_default_str();
  cmd->add_option("--seed", *seed, "sr: the draw is counter_random(seed, 0, 0)")
      ->check(non_negative())
      ->capture_default_str();
  cmd->callback([=, &action] { action = [=] { return explain_value(*value, *fmt_name, *mode, *seed); }; });
}

const Registrar registered("explain", add_explain);
}  // namespace

}  // namespace rpsim::cli
