#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "commands.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/print.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::cli {
namespace {

double parse_value(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0')
    throw UsageError(fmt::format("VALUE '{}' is not a number (decimal, hex float, inf or nan)", text));
  return v;
}

void print_encoding(const Format& f, const char* label, std::uint64_t bits) {
  fmt::print("  {:<10} {:<24} {}  [{}]  {}\n", label, decimal(f, bits), hex_bits(f, bits),
             binary_fields(f, bits), classify(f, bits));
}

int explain(const std::string& value_text, const std::string& format_name, const std::string& mode_name) {
  const Format& f = format(format_name);
  Rounding r;
  r.mode = parse_rounding(mode_name);
  if (r.mode == RoundingMode::stochastic) r.random_bits = 0x9E3779B97F4A7C15ull;
  const double v = parse_value(value_text);
  fmt::print("value        {} (as binary64: {})\n", value_text, v);
  fmt::print("format       {}: {} bits, precision {}, emin {}, emax {}, max {}, min normal {}, min subnormal {}\n",
             f.name, f.bits, f.precision(), f.emin, f.emax, f.max_finite(), f.min_normal(),
             f.min_positive());
  Flags fl = 0;
  const std::uint64_t rounded = round_double(f, v, r, fl);
  Flags ignore = 0;
  Rounding down = r, up = r;
  down.mode = RoundingMode::down;
  up.mode = RoundingMode::up;
  down.overflow = up.overflow = Overflow::saturate;
  const std::uint64_t below = round_double(f, v, down, ignore);
  const std::uint64_t above = round_double(f, v, up, ignore);
  fmt::print("neighbours\n");
  print_encoding(f, "below", below);
  print_encoding(f, "above", above);
  fmt::print("rounded ({})\n", rounding_name(r.mode));
  print_encoding(f, "result", rounded);
  const double got = to_double(f, rounded);
  if (std::isfinite(v) && std::isfinite(got)) {
    const double abs_err = got - v;
    fmt::print("abs error    {:.17g}\n", abs_err);
    if (v != 0) fmt::print("rel error    {:.17g}\n", abs_err / std::fabs(v));
    // ulp of the result's binade (the spacing at the rounded value).
    const int e = got == 0 ? f.emin : std::max(std::ilogb(got), f.emin);
    const double ulp = std::ldexp(1.0, e - f.man_bits);
    fmt::print("ulp          {:.17g} (error = {:.6g} ulp; unit roundoff u = 2^-{})\n", ulp, abs_err / ulp,
               f.precision());
  }
  fmt::print("flags        {}{}{}{}{}\n", fl & flag_inexact ? "inexact " : "", fl & flag_underflow ? "underflow " : "",
             fl & flag_overflow ? "overflow " : "", fl & flag_invalid ? "invalid " : "", fl == 0 ? "exact" : "");
  fmt::print("subnormal    {}\noverflowed   {}\nunderflowed  {}\n", classify(f, rounded) == "subnormal" ? "yes" : "no",
             fl & flag_overflow ? "yes" : "no", fl & flag_underflow ? "yes" : "no");
  return 0;
}

}  // namespace

namespace {
void add_explain(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("explain", "Show how a value rounds to a format");
  auto value = std::make_shared<std::string>();
  auto fmt_name = std::make_shared<std::string>("binary16");
  auto mode = std::make_shared<std::string>("rne");
  cmd->add_option("VALUE", *value, "a decimal or hex-float number")->required();
  cmd->add_option("-f,--format", *fmt_name, "format name or spec (binary16, bf16, e4m3, e5m10, ...)")
      ->capture_default_str();
  cmd->add_option("-r,--rounding", *mode, "rne rna rtz rd ru rodd sr")->capture_default_str();
  cmd->callback([=, &action] { action = [=] { return explain(*value, *fmt_name, *mode); }; });
}

const Registrar registered("explain", add_explain);
}  // namespace

}  // namespace rpsim::cli
