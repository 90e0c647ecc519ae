// The format descriptor: every format, IEEE or not, is one row of data.
// Modelled on LLVM's fltSemantics: adding a format is adding a row (and tests).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "rpsim/formats/format_desc.hpp"

namespace rpsim {

// A fixed-point row is the same descriptor with an exponent range of width
// zero: word length w = man_bits + 1 (the sign and the w - 1 bits below it),
// fraction length f = frac_bits, values k * 2^-f for integers k in
// [-2^(w-1), 2^(w-1) - 1]. Its derived fields read as a floating-point format
// whose every value lies on one grid: emin = emax = w - 1 - f, so the spacing
// 2^(emin - man_bits) is 2^-f everywhere and min_positive() is 2^-f. Fixed
// point saturates (no infinity, no NaN), has one zero, no subnormals in the
// IEEE sense, and raises underflow when a non-zero value rounds to 0.
// Format is the row's numbers (FormatDesc, format_desc.hpp: the fields, and
// the helpers the scalar core shares with the CUDA backend) and its name.
struct Format : FormatDesc {
  std::string name;

  int precision() const { return hd::precision(*this); }
  bool has_inf() const { return hd::has_inf(*this); }
  bool has_nan() const { return hd::has_nan(*this); }
  bool is_fixed_point() const { return hd::is_fixed_point(*this); }
  std::uint64_t bit_mask() const { return hd::bit_mask(*this); }
  std::uint64_t sign_bit() const { return hd::sign_bit(*this); }
  std::uint64_t man_mask() const { return hd::man_mask(*this); }
  std::uint64_t exp_field_max() const { return hd::exp_field_max(*this); }

  std::uint64_t inf_bits(bool negative) const { return hd::inf_bits(*this, negative); }  // requires has_inf()
  // The finite value of largest magnitude with that sign (fixed point:
  // -2^(w-1) * 2^-f for negative, one step beyond the positive maximum).
  std::uint64_t max_finite_bits(bool negative) const { return hd::max_finite_bits(*this, negative); }
  std::uint64_t zero_bits(bool negative) const { return hd::zero_bits(*this, negative); }
  std::uint64_t min_positive_bits() const;  // smallest positive (subnormal if any)
  double max_finite() const;
  double lowest() const;  // the least finite value (-max_finite(); fixed point -2^(w-1-f); unsigned 0)
  double min_normal() const;
  double min_positive() const;

  // Computes the derived fields and checks that the row makes sense;
  // throws FormatError naming the field otherwise.
  void finalize();

  // The one definition of format equality: two rows are the same format when
  // every defining field matches. The name is only a label ("fp16" and
  // "binary16" are one format); the derived fields follow from the others.
  friend bool operator==(const Format& a, const Format& b) {
    return a.kind == b.kind && a.frac_bits == b.frac_bits && a.exp_bits == b.exp_bits &&
           a.man_bits == b.man_bits && a.bias == b.bias && a.has_sign == b.has_sign &&
           a.has_zero == b.has_zero && a.subnormals == b.subnormals && a.nonfinite == b.nonfinite &&
           a.nan == b.nan && a.overflow == b.overflow;
  }
};

class FormatError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Named formats: binary64 binary32 tf32 binary16 bfloat16 e5m2 e4m3 e4m3fnuz
// e5m2fnuz e3m2 e2m3 e2m1 e8m0, plus aliases (fp32, f16, bf16, half, ...).
const std::vector<Format>& named_formats();

// A named format, an alias, or a spec string:
//   "e5m10"            IEEE-like: 5 exponent bits, 10 fraction bits, bias 15
//   "e4m3fn"/"e5m2fnuz" OCP / fnuz variants of any widths
//   "exp=5,man=10,bias=15,subnormals=no,nonfinite=ieee,overflow=saturate,sign=yes"
//   "q16.14", "fixed:16:14", "word=16,frac=14"
//                      signed fixed point: word length 16 (sign included),
//                      14 fraction bits (Gupta et al.'s <IL,FL> = <2,14>)
// Throws FormatError with the offending text.
Format parse_format(std::string_view spec);

// Convenience for the fixed table; the reference lives as long as the program.
const Format& format(std::string_view name);

namespace formats {
const Format& binary64();
const Format& binary32();
const Format& tf32();
const Format& binary16();
const Format& bfloat16();
const Format& e5m2();
const Format& e4m3();
}  // namespace formats

// Whether every value of `narrow` (its zeros, infinities and NaN included)
// is a value of `wide`, so that rounding a value of `narrow` to `wide` is the
// identity whatever the mode: binary16 and e4m3 in binary32, e4m3 in
// binary16, q16.14 in binary32; not bfloat16 in binary16 (range), not e4m3 in
// e5m2 (precision). Conservative: false where it cannot tell.
bool holds(const Format& wide, const Format& narrow);

// A signed fixed-point row: word length `word_bits` (2..53, sign included) and
// `frac_bits` fraction bits (0..1074); throws FormatError naming the bad one.
Format fixed_point(int word_bits, int frac_bits, std::string name = {});

}  // namespace rpsim
