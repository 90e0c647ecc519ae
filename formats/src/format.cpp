#include "rpsim/formats/format.hpp"

#include "format_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace rpsim {
namespace {

// Every named format is these seven fields; finalize() derives the rest.
Format make(std::string name, int e, int m, int bias, NonFinite nonfinite, NanEncoding nan,
            Overflow overflow) {
  Format f;
  f.name = std::move(name);
  f.exp_bits = e;
  f.man_bits = m;
  f.bias = bias;
  f.nonfinite = nonfinite;
  f.nan = nan;
  f.overflow = overflow;
  f.finalize();
  return f;
}

// IEEE 754 binary interchange layout: bias 2^(e-1) - 1, infinities, NaNs.
Format ieee_like(std::string name, int e, int m) {
  const Format ieee;
  return make(std::move(name), e, m, (1 << (e - 1)) - 1, ieee.nonfinite, ieee.nan, ieee.overflow);
}

// OCP 8-bit floating point spec (2023) and OCP MX v1.0, section 5.3.
Format ocp_fn(std::string name, int e, int m, int bias) {
  return make(std::move(name), e, m, bias, NonFinite::nan_only, NanEncoding::all_ones, Overflow::nan);
}

// The "fnuz" formats of Graphcore/AMD (LLVM Float8E4M3FNUZ): no -0, whose
// pattern is the single NaN, and a bias one larger than OCP's.
Format fnuz(std::string name, int e, int m) {
  return make(std::move(name), e, m, 1 << (e - 1), NonFinite::nan_only, NanEncoding::negative_zero,
              Overflow::nan);
}

// OCP MX FP6/FP4 element formats: no infinities or NaNs; conversions saturate.
Format mx_finite(std::string name, int e, int m) {
  return make(std::move(name), e, m, (1 << (e - 1)) - 1, NonFinite::finite_only, NanEncoding::none,
              Overflow::saturate);
}

// OCP MX E8M0 scale: unsigned powers of two 2^-127..2^127, 0xFF is NaN.
Format e8m0() {
  Format f = make("e8m0", 8, 0, 127, NonFinite::nan_only, NanEncoding::all_ones, Overflow::nan);
  f.has_sign = false;
  f.has_zero = false;
  f.subnormals = false;
  f.finalize();
  return f;
}

// The named formats, one row each: the format and the other names it goes
// by (the frameworks' spellings). Listing order is this order.
struct NamedFormat {
  Format format;
  std::vector<std::string_view> aliases;
};

const std::vector<NamedFormat>& rows() {
  static const std::vector<NamedFormat> t = {
      {ieee_like("binary64", 11, 52), {"fp64", "f64", "double"}},
      {ieee_like("binary32", 8, 23), {"fp32", "f32", "float"}},
      {ieee_like("tf32", 8, 10), {"tensorfloat32"}},  // 19-bit encoding; NVIDIA TF32
      {ieee_like("binary16", 5, 10), {"fp16", "f16", "half"}},
      {ieee_like("bfloat16", 8, 7), {"bf16"}},
      {ieee_like("e5m2", 5, 2), {"fp8e5m2", "float8_e5m2"}},  // OCP E5M2 is IEEE-like
      // OCP E4M3FN: max 448, NaN S.1111.111
      {ocp_fn("e4m3", 4, 3, 7), {"e4m3fn", "fp8e4m3", "float8_e4m3fn"}},
      {fnuz("e4m3fnuz", 4, 3), {}},
      {fnuz("e5m2fnuz", 5, 2), {}},
      {mx_finite("e3m2", 3, 2), {"fp6e3m2"}},
      {mx_finite("e2m3", 2, 3), {"fp6e2m3"}},
      {mx_finite("e2m1", 2, 1), {"fp4", "fp4e2m1"}},
      {e8m0(), {"e8m0fnu"}},
  };
  return t;
}

// The floating-point view of a Q format (format.hpp): every field follows
// from the word length man_bits + 1 and the fraction length f.frac_bits.
void finalize_fixed_point(Format& f) {
  const std::string who = "format '" + f.name + "': ";
  const int word = f.man_bits + 1;
  if (word < 2 || word > 53)
    throw FormatError(who + "word length " + std::to_string(word) +
                      " outside 2..53 (every value must be a binary64 value)");
  if (f.frac_bits < 0 || f.frac_bits > 1074)
    throw FormatError(who + "fraction length " + std::to_string(f.frac_bits) + " outside 0..1074");
  f.exp_bits = 0;
  f.bias = 0;
  f.has_sign = true;
  f.has_zero = true;
  f.subnormals = true;
  f.nonfinite = NonFinite::finite_only;
  f.nan = NanEncoding::none;
  f.overflow = Overflow::saturate;
  f.bits = word;
  f.emin = f.emax = word - 1 - f.frac_bits;
  f.max_significand = (1ull << (word - 1)) - 1;
}

}  // namespace

void Format::finalize() {
  const std::string who = "format '" + name + "': ";
  if (kind == FormatKind::fixed_point) {
    finalize_fixed_point(*this);
    return;
  }
  if (exp_bits < 1 || exp_bits > 11) throw FormatError(who + "exponent bits must be 1..11");
  if (man_bits < 0 || man_bits > 52) throw FormatError(who + "fraction bits must be 0..52");
  // A bias outside the exponent field's range leaves 1.0 unrepresentable
  // and the format meaningless as an arithmetic format.
  if (bias < 0 || bias > int(exp_field_max()))
    throw FormatError(who + "bias " + std::to_string(bias) + " outside 0.." +
                      std::to_string(exp_field_max()));
  bits = int(has_sign) + exp_bits + man_bits;
  if (bits > 64) throw FormatError(who + "more than 64 bits");
  if (nonfinite == NonFinite::ieee && man_bits == 0)
    throw FormatError(who + "an IEEE-style format needs at least one fraction bit for NaN");
  if (nan == NanEncoding::negative_zero && !has_sign)
    throw FormatError(who + "fnuz NaN encoding needs a sign bit");
  if (nonfinite == NonFinite::nan_only && nan == NanEncoding::all_ones && man_bits == 0 && exp_bits < 2 &&
      has_zero)
    throw FormatError(who + "too few bits for a NaN");
  if (nonfinite == NonFinite::finite_only) nan = NanEncoding::none;
  if (overflow == Overflow::infinity && !has_inf()) overflow = has_nan() ? Overflow::nan : Overflow::saturate;
  if (overflow == Overflow::nan && !has_nan()) overflow = Overflow::saturate;

  const int top_field = int(exp_field_max());
  emin = (has_zero ? 1 : 0) - bias;
  const std::uint64_t full = (1ull << (man_bits + 1)) - 1;
  switch (nonfinite) {
    case NonFinite::ieee:
      emax = top_field - 1 - bias;
      max_significand = full;
      break;
    case NonFinite::nan_only:
      emax = top_field - bias;
      // all_ones: the all-ones fraction at the top exponent is NaN.
      max_significand = nan == NanEncoding::all_ones ? full - 1 : full;
      if (nan == NanEncoding::all_ones && man_bits == 0) {
        emax -= 1;  // E8M0: 0xFF is NaN, 0xFE is 2^127
        max_significand = 1;
      }
      break;
    case NonFinite::finite_only:
      emax = top_field - bias;
      max_significand = full;
      break;
  }
  if (emax < emin) throw FormatError(who + "no finite normal numbers (emax < emin)");
  // Every value must be a binary64 value: to_double, comparisons and the
  // array path rely on it (a bias of 1 with 11 exponent bits would not).
  if (emax > 1023 || (subnormals ? emin - man_bits : emin) < -1074)
    throw FormatError(who + "range beyond binary64 (emax " + std::to_string(emax) + ", emin " +
                      std::to_string(emin) + ")");
}

Format fixed_point(int word_bits, int frac_bits, std::string name) {
  Format f;
  f.name = name.empty() ? fmt::format("q{}.{}", word_bits, frac_bits) : std::move(name);
  f.kind = FormatKind::fixed_point;
  f.man_bits = word_bits - 1;
  f.frac_bits = frac_bits;
  f.finalize();
  return f;
}

std::uint64_t Format::min_positive_bits() const {
  if (!has_zero) return 0;
  if (subnormals && man_bits > 0) return 1;
  return 1ull << man_bits;
}

double Format::max_finite() const {
  return std::ldexp(double(max_significand), emax - man_bits);
}
double Format::lowest() const {
  if (is_fixed_point()) return -std::ldexp(1.0, emax);
  if (has_sign) return -max_finite();
  return has_zero ? 0.0 : min_positive();
}
double Format::min_normal() const {
  return std::ldexp(1.0, emin);
}
double Format::min_positive() const {
  return subnormals && has_zero ? std::ldexp(1.0, emin - man_bits) : std::ldexp(1.0, emin);
}

const std::vector<Format>& named_formats() {
  static const std::vector<Format> table = [] {
    std::vector<Format> t;
    for (const NamedFormat& row : rows()) t.push_back(row.format);
    return t;
  }();
  return table;
}

namespace {
// By name or alias; the Format returned is named_formats()'s.
const Format* find_named(std::string_view name) {
  const auto& table = named_formats();
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto& aliases = rows()[i].aliases;
    if (table[i].name == name || std::find(aliases.begin(), aliases.end(), name) != aliases.end())
      return &table[i];
  }
  return nullptr;
}

const Format& named(std::string_view name) {
  return *find_named(name);  // a name of the table above
}
}  // namespace

Format parse_format(std::string_view spec) {
  if (spec.empty()) throw FormatError("format '': empty format name");
  if (const Format* f = find_named(spec)) return *f;
  Format f;
  f.name = std::string(spec);
  if (!detail::parse_spec(spec, f)) {
    std::string known;
    for (const Format& n : named_formats()) known += " " + n.name;
    throw FormatError("format '" + std::string(spec) + "': unknown format (named formats:" + known +
                      "; or a spec like e5m10, e4m3fn, e5m2fnuz, exp=5,man=10, q16.14 for fixed point)");
  }
  f.finalize();
  return f;
}

const Format& format(std::string_view name) {
  if (const Format* f = find_named(name)) return *f;
  // Custom formats are interned so that references stay valid.
  static std::map<std::string, Format, std::less<>> interned;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = interned.find(name); it != interned.end()) return it->second;
  Format f = parse_format(name);
  return interned.emplace(std::string(name), std::move(f)).first->second;
}

namespace formats {
const Format& binary64() {
  static const Format& f = named("binary64");
  return f;
}
const Format& binary32() {
  static const Format& f = named("binary32");
  return f;
}
const Format& tf32() {
  static const Format& f = named("tf32");
  return f;
}
const Format& binary16() {
  static const Format& f = named("binary16");
  return f;
}
const Format& bfloat16() {
  static const Format& f = named("bfloat16");
  return f;
}
const Format& e5m2() {
  static const Format& f = named("e5m2");
  return f;
}
const Format& e4m3() {
  static const Format& f = named("e4m3");
  return f;
}
}  // namespace formats

bool holds(const Format& wide, const Format& narrow) {
  if (wide == narrow) return true;
  if (wide.is_fixed_point()) return false;  // (a fixed-point grid holding another: not needed)
  if (narrow.has_sign && !wide.has_sign) return false;
  if ((narrow.has_inf() && !wide.has_inf()) || (narrow.has_nan() && !wide.has_nan())) return false;
  // -0: a signed format has it unless its pattern is the NaN (the fnuz formats); zero itself (E8M0 has none)
  const auto has_negative_zero = [](const Format& f) {
    return f.has_sign && f.has_zero && f.nan != NanEncoding::negative_zero;
  };
  if (has_negative_zero(narrow) && !has_negative_zero(wide)) return false;
  if (narrow.has_zero && !wide.has_zero) return false;
  // Every finite value of narrow is an integer multiple of its smallest
  // positive value, with at most precision() significant bits, up to its
  // largest finite; wide holds exactly those below its own largest finite
  // whose spacing its grid has: the same or finer spacing at the bottom and
  // at least as many significand bits.
  const int narrow_bits = narrow.is_fixed_point() ? narrow.bits - 1 : narrow.precision();
  if (wide.precision() < narrow_bits) return false;
  if (narrow.max_finite() > wide.max_finite()) return false;
  const double wide_step = wide.subnormals ? wide.min_positive() : std::ldexp(1.0, wide.emin - wide.man_bits);
  if (!wide.subnormals && narrow.min_positive() < wide.min_positive()) return false;
  return narrow.min_positive() >= wide_step && std::fmod(narrow.min_positive(), wide_step) == 0.0;
}

}  // namespace rpsim
