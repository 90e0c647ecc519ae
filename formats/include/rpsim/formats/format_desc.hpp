// The numbers of a format row without its name: what rounding needs, as a
// plain struct a CUDA kernel takes by value. `Format` (format.hpp) is this
// plus its name and the host-side helpers; the scalar core
// (scalar_core.hpp) works on FormatDesc on both devices.
#pragma once

#include <cstdint>

#include "rpsim/formats/host_device.hpp"

namespace rpsim {

// What the largest exponent field means.
enum class NonFinite : std::uint8_t {
  ieee,        // top exponent field holds infinities and NaNs
  nan_only,    // no infinities; NaN has its own encoding (see NanEncoding)
  finite_only  // every encoding is a finite number (OCP MX FP6/FP4)
};

enum class NanEncoding : std::uint8_t {
  ieee,           // exponent all ones, fraction non-zero; top fraction bit = quiet
  all_ones,       // exponent and fraction all ones, either sign (OCP E4M3FN, E8M0)
  negative_zero,  // the pattern of -0 is the only NaN (the "fnuz" formats)
  none
};

// What a result beyond the largest finite value becomes when the rounding
// direction points away from zero.
enum class Overflow : std::uint8_t { infinity, nan, saturate };

// How an encoding reads: sign, exponent field and fraction (every IEEE-like
// row), or a two's-complement integer times 2^-frac_bits (a signed Q format,
// as in Gupta et al. 2015 and DSP hardware).
enum class FormatKind : std::uint8_t { floating, fixed_point };

// See Format (format.hpp) for the meaning of each field. Trivially copyable.
struct FormatDesc {
  FormatKind kind = FormatKind::floating;
  int frac_bits = 0;  // fixed point only: the fraction length f
  int exp_bits = 0;
  int man_bits = 0;  // stored fraction bits, without the implicit bit
  int bias = 0;
  bool has_sign = true;
  bool has_zero = true;    // false for E8M0: exponent field 0 is 2^-127
  bool subnormals = true;  // false: tiny values round to 0 or the smallest normal
  NonFinite nonfinite = NonFinite::ieee;
  NanEncoding nan = NanEncoding::ieee;
  Overflow overflow = Overflow::infinity;

  // Derived by Format::finalize(); never set by hand.
  int bits = 0;                       // storage width of one encoding
  int emin = 0;                       // exponent of the smallest normal
  int emax = 0;                       // exponent of the largest finite
  std::uint64_t max_significand = 0;  // of the largest finite, implicit bit included
};

namespace hd {
RPSIM_HD_ABI_BEGIN

RPSIM_HD_INLINE int precision(const FormatDesc& f) {
  return f.man_bits + 1;
}
RPSIM_HD_INLINE bool has_inf(const FormatDesc& f) {
  return f.nonfinite == NonFinite::ieee;
}
RPSIM_HD_INLINE bool has_nan(const FormatDesc& f) {
  return f.nan != NanEncoding::none;
}
RPSIM_HD_INLINE bool is_fixed_point(const FormatDesc& f) {
  return f.kind == FormatKind::fixed_point;
}
RPSIM_HD_INLINE std::uint64_t bit_mask(const FormatDesc& f) {
  return f.bits >= 64 ? ~0ull : (1ull << f.bits) - 1;
}
RPSIM_HD_INLINE std::uint64_t sign_bit(const FormatDesc& f) {
  return f.has_sign ? 1ull << (f.bits - 1) : 0;
}
RPSIM_HD_INLINE std::uint64_t man_mask(const FormatDesc& f) {
  return (1ull << f.man_bits) - 1;
}
RPSIM_HD_INLINE std::uint64_t exp_field_max(const FormatDesc& f) {
  return (1ull << f.exp_bits) - 1;
}
RPSIM_HD_INLINE std::uint64_t inf_bits(const FormatDesc& f, bool negative) {
  return (negative ? sign_bit(f) : 0) | (exp_field_max(f) << f.man_bits);
}
// The finite value of largest magnitude with that sign (fixed point:
// -2^(w-1) * 2^-f for negative, one step beyond the positive maximum).
RPSIM_HD_INLINE std::uint64_t max_finite_bits(const FormatDesc& f, bool negative) {
  if (is_fixed_point(f)) return negative ? sign_bit(f) : f.max_significand;  // -2^(w-1), 2^(w-1) - 1
  const std::uint64_t field = std::uint64_t(f.emax + f.bias);
  return (negative ? sign_bit(f) : 0) | (field << f.man_bits) | (f.max_significand & man_mask(f));
}
RPSIM_HD_INLINE std::uint64_t zero_bits(const FormatDesc& f, bool negative) {
  if (!f.has_zero || is_fixed_point(f)) return 0;  // E8M0 has no zero; fixed point has one
  if (f.nan == NanEncoding::negative_zero) return 0;
  return negative ? sign_bit(f) : 0;
}

// The two rows the core converts through, as Format::finalize() derives them
// (tests/formats/test_scalar_core.cpp checks they equal the table's).
RPSIM_HD_INLINE FormatDesc binary64_desc() {
  FormatDesc f;
  f.exp_bits = 11;
  f.man_bits = 52;
  f.bias = 1023;
  f.bits = 64;
  f.emin = -1022;
  f.emax = 1023;
  f.max_significand = (1ull << 53) - 1;
  return f;
}
RPSIM_HD_INLINE FormatDesc binary32_desc() {
  FormatDesc f;
  f.exp_bits = 8;
  f.man_bits = 23;
  f.bias = 127;
  f.bits = 32;
  f.emin = -126;
  f.emax = 127;
  f.max_significand = (1ull << 24) - 1;
  return f;
}

RPSIM_HD_ABI_END
}  // namespace hd

}  // namespace rpsim
