// Custom format specs: the short IEEE-like form, the key=value form and the
// fixed-point forms. Every error names the spec and the field.
#include "format_spec.hpp"

#include "rpsim/formats/behaviour_names.hpp"

#include <string>

namespace rpsim::detail {
namespace {

[[noreturn]] void bad(std::string_view spec, const std::string& why) {
  throw FormatError("format '" + std::string(spec) + "': " + why);
}

int parse_int(std::string_view spec, std::string_view text, const char* field) {
  if (text.empty()) bad(spec, std::string("field '") + field + "' has no value");
  int v = 0;
  bool neg = false;
  std::size_t i = 0;
  if (text[0] == '-') {
    neg = true;
    i = 1;
  }
  if (i == text.size()) bad(spec, std::string("field '") + field + "' is not an integer");
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9' || v > 100000)
      bad(spec, std::string("field '") + field + "' is not an integer: '" + std::string(text) + "'");
    v = v * 10 + (text[i] - '0');
  }
  return neg ? -v : v;
}

bool parse_bool(std::string_view spec, std::string_view text, const char* field) {
  if (text == "yes" || text == "true" || text == "1" || text == "on") return true;
  if (text == "no" || text == "false" || text == "0" || text == "off") return false;
  bad(spec, std::string("field '") + field + "' must be yes/no, got '" + std::string(text) + "'");
}

// "e5m10", "e4m3fn", "e5m2fnuz"
bool parse_short(std::string_view spec, Format& f) {
  if (spec.size() < 4 || spec[0] != 'e') return false;
  std::size_t m = spec.find('m');
  if (m == std::string_view::npos || m < 2) return false;
  std::string_view es = spec.substr(1, m - 1);
  std::string_view rest = spec.substr(m + 1);
  std::size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  if (digits == 0) return false;
  for (char c : es)
    if (c < '0' || c > '9') return false;
  std::string_view ms = rest.substr(0, digits);
  std::string_view suffix = rest.substr(digits);
  f.exp_bits = parse_int(spec, es, "exponent bits");
  f.man_bits = parse_int(spec, ms, "fraction bits");
  if (f.exp_bits < 1 || f.exp_bits > 11) bad(spec, "exponent bits must be 1..11");
  f.bias = (1 << (f.exp_bits - 1)) - 1;
  if (suffix.empty()) {
  } else if (suffix == "fn") {
    f.nonfinite = NonFinite::nan_only;
    f.nan = NanEncoding::all_ones;
    f.overflow = Overflow::nan;
  } else if (suffix == "fnuz") {
    f.bias += 1;
    f.nonfinite = NonFinite::nan_only;
    f.nan = NanEncoding::negative_zero;
    f.overflow = Overflow::nan;
  } else if (suffix == "f") {  // finite only, as the MX FP6/FP4 formats
    f.nonfinite = NonFinite::finite_only;
    f.nan = NanEncoding::none;
    f.overflow = Overflow::saturate;
  } else {
    bad(spec, "unknown suffix '" + std::string(suffix) + "' (expected fn, fnuz or f)");
  }
  return true;
}

void parse_fields(std::string_view spec, Format& f) {
  bool have_exp = false, have_man = false, have_bias = false;
  std::string_view rest = spec;
  while (!rest.empty()) {
    std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) bad(spec, "expected key=value, got '" + std::string(item) + "'");
    std::string_view key = item.substr(0, eq), val = item.substr(eq + 1);
    if (key == "exp" || key == "exp_bits") {
      f.exp_bits = parse_int(spec, val, "exp");
      have_exp = true;
    } else if (key == "man" || key == "man_bits" || key == "frac") {
      f.man_bits = parse_int(spec, val, "man");
      have_man = true;
    } else if (key == "bias") {
      f.bias = parse_int(spec, val, "bias");
      have_bias = true;
    } else if (key == "subnormals") {
      f.subnormals = parse_bool(spec, val, "subnormals");
    } else if (key == "sign") {
      f.has_sign = parse_bool(spec, val, "sign");
    } else if (key == "nonfinite") {
      if (val == "ieee") {
        f.nonfinite = NonFinite::ieee;
        f.nan = NanEncoding::ieee;
      } else if (val == "nan_only" || val == "fn") {
        f.nonfinite = NonFinite::nan_only;
        f.nan = NanEncoding::all_ones;
      } else if (val == "fnuz") {
        f.nonfinite = NonFinite::nan_only;
        f.nan = NanEncoding::negative_zero;
      } else if (val == "finite_only" || val == "none") {
        f.nonfinite = NonFinite::finite_only;
        f.nan = NanEncoding::none;
      } else {
        bad(spec, "nonfinite must be ieee, fn, fnuz or finite_only, got '" + std::string(val) + "'");
      }
    } else if (key == "overflow") {
      const auto o = overflow_named(val);
      if (!o) bad(spec, "overflow must be " + overflow_names() + ", got '" + std::string(val) + "'");
      f.overflow = *o;
    } else if (key == "name") {
      f.name = std::string(val);
    } else {
      bad(spec, "unknown field '" + std::string(key) + "'");
    }
  }
  if (!have_exp) bad(spec, "missing field 'exp'");
  if (!have_man) bad(spec, "missing field 'man'");
  if (f.exp_bits < 1 || f.exp_bits > 11) bad(spec, "exp must be 1..11");
  if (!have_bias) f.bias = (1 << (f.exp_bits - 1)) - 1 + (f.nan == NanEncoding::negative_zero);
  // A default that cannot be honoured follows the non-finite behaviour.
  if (f.overflow == Overflow::infinity && !f.has_inf())
    f.overflow = f.has_nan() ? Overflow::nan : Overflow::saturate;
  if (f.overflow == Overflow::nan && !f.has_nan()) f.overflow = Overflow::saturate;
}

// "q16.14" / "fixed:16:14": word length, then fraction length. Word length
// first, as MATLAB's fixdt(1, 16, 14) and the Q-format convention;
// Gupta et al.'s <IL, FL> = <2, 14> is q16.14 (IL counts the sign bit).
bool parse_fixed_short(std::string_view spec, Format& f) {
  std::string_view rest;
  char separator;
  if (spec.size() > 1 && spec[0] == 'q' && spec[1] >= '0' && spec[1] <= '9') {
    rest = spec.substr(1);
    separator = '.';
  } else if (spec.starts_with("fixed:")) {
    rest = spec.substr(6);
    separator = ':';
  } else {
    return false;
  }
  const std::size_t at = rest.find(separator);
  if (at == std::string_view::npos)
    bad(spec, std::string("fixed point needs word and fraction lengths, as q16.14 or fixed:16:14"));
  f = fixed_point(parse_int(spec, rest.substr(0, at), "word length"),
                  parse_int(spec, rest.substr(at + 1), "fraction length"), std::string(spec));
  return true;
}

// "word=16,frac=14[,name=N]": the key=value form of a fixed-point row.
void parse_fixed_fields(std::string_view spec, Format& f) {
  int word = 0, frac = 0;
  bool have_word = false, have_frac = false;
  std::string name(spec);
  std::string_view rest = spec;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) bad(spec, "expected key=value, got '" + std::string(item) + "'");
    const std::string_view key = item.substr(0, eq), val = item.substr(eq + 1);
    if (key == "word") {
      word = parse_int(spec, val, "word");
      have_word = true;
    } else if (key == "frac") {
      frac = parse_int(spec, val, "frac");
      have_frac = true;
    } else if (key == "name")
      name = std::string(val);
    else if (key != "kind" || val != "fixed")
      bad(spec, "field '" + std::string(key) + "' is not a fixed-point field (word, frac, name)");
  }
  if (!have_word) bad(spec, "missing field 'word'");
  if (!have_frac) bad(spec, "missing field 'frac'");
  f = fixed_point(word, frac, name);
}

}  // namespace

bool parse_spec(std::string_view spec, Format& f) {
  if (parse_fixed_short(spec, f)) return true;
  if (spec.find('=') != std::string_view::npos) {
    if (spec.starts_with("word=") || spec.find(",word=") != std::string_view::npos ||
        spec.starts_with("kind=fixed"))
      parse_fixed_fields(spec, f);
    else
      parse_fields(spec, f);
    return true;
  }
  return parse_short(spec, f);
}

}  // namespace rpsim::detail
