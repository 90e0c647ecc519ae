// Typed values: `half`, `bfloat16`, `float8_e4m3`, ... as C++ scalars whose
// every operation is one correctly rounded call into the formats core
// (ops.hpp) under the current thread's ScopedRounding, accumulating IEEE
// flags there. A thin layer in the manner of ml_dtypes' float8.h: the class
// stores the bit pattern and owns no arithmetic of its own.
//
//   rpsim::half a(0.1), b(3.0);
//   rpsim::half c = a * b + a;               // two roundings (mul, then add)
//   rpsim::half d = fma(a, b, a);            // one rounding
//   Eigen::Matrix<rpsim::half, -1, -1> m;    // rounds after every + and *
//
// Also: std::numeric_limits, Eigen::NumTraits (declared here without
// including Eigen), sqrt/abs/fma/isnan/isinf/isfinite/signbit by ADL, and an
// fmt formatter ("{}" decimal, "{:x}" hex bits, "{:b}" fields).
//
// The rounding environment is per thread: Eigen's GEMM, when built with
// OpenMP, runs blocks on worker threads that do not see the caller's
// ScopedRounding. Call Eigen::setNbThreads(1) when the mode is not RNE.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "rpsim/formats/format.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/print.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/scoped_rounding.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim {

// A format name usable as a template argument: NamedFormat<"binary16", ...>.
template <std::size_t N>
struct FormatName {
  char text[N]{};
  constexpr FormatName(const char (&name)[N]) { std::copy_n(name, N, text); }
};

// A tag names a format for Float<Tag>: `static const Format& format()` and the
// integer type that stores one encoding. Any format (a spec string included)
// can have a tag; the table lookup happens once, on first use.
template <FormatName Name, class Storage = std::uint64_t>
struct NamedFormat {
  using storage = Storage;
  static const Format& format() {
    static const Format& cached = checked(rpsim::format(Name.text));
    return cached;
  }

 private:
  static const Format& checked(const Format& f) {
    if (f.bits > int(8 * sizeof(Storage)))
      throw FormatError("format '" + f.name + "': " + std::to_string(f.bits) + " bits do not fit the " +
                        std::to_string(8 * sizeof(Storage)) + "-bit storage of its value type");
    return f;
  }
};

template <class Tag>
concept FormatTag = requires {
  { Tag::format() } -> std::same_as<const Format&>;
  typename Tag::storage;
  requires std::unsigned_integral<typename Tag::storage>;
};

template <FormatTag Tag>
class Float {
 public:
  using tag = Tag;
  using storage_type = typename Tag::storage;

  static const Format& format() { return Tag::format(); }

  // Trivial, as Eigen's RequireInitialization = 0 promises; Float{} is +0.
  Float() = default;

  // Rounds under the current ScopedRounding.
  explicit Float(double value)
      : bits_(storage_type(round_double(format(), value, next_rounding(), accumulated_flags()))) {}
  explicit Float(float value) {
    std::uint32_t b;
    std::memcpy(&b, &value, 4);
    bits_ = storage_type(convert(format(), formats::binary32(), b, next_rounding(), accumulated_flags()));
  }
  // Integers round exactly once, even those beyond 2^53.
  template <std::integral I>
  requires(!std::same_as<I, bool>) explicit Float(I value) {
    const bool negative = value < 0;
    const std::uint64_t magnitude = negative ? std::uint64_t(0) - std::uint64_t(value) : std::uint64_t(value);
    bits_ = storage_type(
        round_pack(format(), negative, 0, magnitude, false, next_rounding(), accumulated_flags()));
  }
  // Correctly rounded conversion between typed values (one rounding).
  template <FormatTag Other>
  explicit Float(Float<Other> other)
      : bits_(storage_type(
            convert(format(), Other::format(), other.bits(), next_rounding(), accumulated_flags()))) {}

  static Float from_bits(std::uint64_t bits) {
    Float v;
    v.bits_ = storage_type(bits & format().bit_mask());
    return v;
  }
  std::uint64_t bits() const { return bits_; }

  // Every value of every format up to binary64 is a binary64: exact.
  explicit operator double() const { return to_double(format(), bits_); }
  // Rounds to binary32 under the current ScopedRounding.
  explicit operator float() const {
    const auto b =
        std::uint32_t(convert(formats::binary32(), format(), bits_, next_rounding(), accumulated_flags()));
    return std::bit_cast<float>(b);
  }

  friend Float operator+(Float a, Float b) {
    return from_bits(add(format(), a.bits_, b.bits_, next_rounding(), accumulated_flags()));
  }
  friend Float operator-(Float a, Float b) {
    return from_bits(sub(format(), a.bits_, b.bits_, next_rounding(), accumulated_flags()));
  }
  friend Float operator*(Float a, Float b) {
    return from_bits(mul(format(), a.bits_, b.bits_, next_rounding(), accumulated_flags()));
  }
  friend Float operator/(Float a, Float b) {
    return from_bits(div(format(), a.bits_, b.bits_, next_rounding(), accumulated_flags()));
  }
  Float& operator+=(Float b) { return *this = *this + b; }
  Float& operator-=(Float b) { return *this = *this - b; }
  Float& operator*=(Float b) { return *this = *this * b; }
  Float& operator/=(Float b) { return *this = *this / b; }
  Float operator+() const { return *this; }
  // IEEE negate: a sign-bit operation, exact, no flags (NaNs included).
  Float operator-() const { return from_bits(negated(bits_)); }

  friend Float sqrt(Float a) {
    return from_bits(rpsim::sqrt(format(), a.bits_, next_rounding(), accumulated_flags()));
  }
  // a * b + c with a single rounding.
  friend Float fma(Float a, Float b, Float c) {
    return from_bits(rpsim::fma(format(), a.bits_, b.bits_, c.bits_, next_rounding(), accumulated_flags()));
  }
  // IEEE abs: clears the sign bit (exact, no flags); fixed point negates a
  // negative word, saturating as negation does.
  friend Float abs(Float a) {
    const Format& f = format();
    if (f.is_fixed_point()) return signbit(a) ? -a : a;
    if (f.nan == NanEncoding::negative_zero && rpsim::is_nan(f, a.bits_)) return a;
    return from_bits(a.bits_ & ~f.sign_bit());
  }
  friend bool isnan(Float a) { return rpsim::is_nan(format(), a.bits_); }
  friend bool isinf(Float a) {
    return format().has_inf() && (a.bits_ & ~format().sign_bit()) == format().inf_bits(false);
  }
  friend bool isfinite(Float a) { return !isnan(a) && !isinf(a); }
  friend bool signbit(Float a) { return !isnan(a) && (a.bits_ & format().sign_bit()) != 0; }

  // IEEE comparisons: == (and the rewritten !=) are quiet; < <= > >= signal
  // invalid for any NaN operand, as C's relational operators do. A NaN
  // compares unordered: every relation but != is false.
  friend bool operator==(Float a, Float b) { return eq(format(), a.bits_, b.bits_, accumulated_flags()); }
  friend bool operator<(Float a, Float b) { return lt(format(), a.bits_, b.bits_, accumulated_flags()); }
  friend bool operator<=(Float a, Float b) { return le(format(), a.bits_, b.bits_, accumulated_flags()); }
  friend bool operator>(Float a, Float b) { return lt(format(), b.bits_, a.bits_, accumulated_flags()); }
  friend bool operator>=(Float a, Float b) { return le(format(), b.bits_, a.bits_, accumulated_flags()); }

  friend std::ostream& operator<<(std::ostream& os, Float a) { return os << decimal(format(), a.bits_); }

 private:
  static std::uint64_t negated(std::uint64_t bits) {
    const Format& f = format();
    if (f.is_fixed_point()) {
      // Two's complement; -(-2^(w-1)) is one step beyond the largest value
      // and saturates, with the overflow flag, like every other overflow.
      if (bits == f.sign_bit()) {
        accumulated_flags() |= flag_overflow | flag_inexact;
        return f.max_finite_bits(false);
      }
      return (~bits + 1) & f.bit_mask();
    }
    if (!f.has_sign) return bits;  // E8M0: nothing to flip (it has no negative numbers)
    if (f.nan == NanEncoding::negative_zero && (bits & ~f.sign_bit()) == 0) return bits;  // fnuz: 0 and NaN
    return bits ^ f.sign_bit();
  }

  storage_type bits_;
};

// The named formats of the table, with storage of their width.
using binary64 = Float<NamedFormat<"binary64", std::uint64_t>>;
using binary32 = Float<NamedFormat<"binary32", std::uint32_t>>;
using tf32 = Float<NamedFormat<"tf32", std::uint32_t>>;
using half = Float<NamedFormat<"binary16", std::uint16_t>>;
using bfloat16 = Float<NamedFormat<"bfloat16", std::uint16_t>>;
using float8_e4m3 = Float<NamedFormat<"e4m3", std::uint8_t>>;  // OCP E4M3FN
using float8_e5m2 = Float<NamedFormat<"e5m2", std::uint8_t>>;
using float8_e4m3fnuz = Float<NamedFormat<"e4m3fnuz", std::uint8_t>>;
using float8_e5m2fnuz = Float<NamedFormat<"e5m2fnuz", std::uint8_t>>;
using float6_e3m2 = Float<NamedFormat<"e3m2", std::uint8_t>>;  // OCP MX FP6
using float6_e2m3 = Float<NamedFormat<"e2m3", std::uint8_t>>;
using float4_e2m1 = Float<NamedFormat<"e2m1", std::uint8_t>>;  // OCP MX FP4
using float8_e8m0 = Float<NamedFormat<"e8m0", std::uint8_t>>;  // OCP MX scale

namespace detail {
// An exact value of the format, rounded without touching the thread's
// environment (its flags or stochastic counter).
template <FormatTag Tag>
Float<Tag> exact_value(double v) {
  Flags ignored = 0;
  return Float<Tag>::from_bits(round_double(Tag::format(), v, Rounding{}, ignored));
}
}  // namespace detail

}  // namespace rpsim

// The formats are rows of run-time data (format.hpp), so the integer members
// are computed from the row during dynamic initialisation rather than being
// constexpr (do not read them from another static initialiser).
template <rpsim::FormatTag Tag>
struct std::numeric_limits<rpsim::Float<Tag>> {
 private:
  using T = rpsim::Float<Tag>;
  static const rpsim::Format& f() { return Tag::format(); }

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;  // fixed point too: its products and quotients round
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr bool traps = false;
  // Tininess is detected after rounding (round.cpp).
  static constexpr bool tinyness_before = false;
  static constexpr bool has_denorm_loss = false;
  static constexpr int radix = 2;
  // The default of a fresh thread; a ScopedRounding changes it at run time.
  static constexpr std::float_round_style round_style = std::round_to_nearest;

  static inline const bool is_signed = f().has_sign;
  static inline const bool has_infinity = f().has_inf();
  static inline const bool has_quiet_NaN = f().has_nan();
  static inline const bool has_signaling_NaN = f().nan == rpsim::NanEncoding::ieee;
  static inline const std::float_denorm_style has_denorm =
      f().subnormals && f().has_zero && f().man_bits > 0 && !f().is_fixed_point() ? std::denorm_present
                                                                                  : std::denorm_absent;
  static inline const bool is_iec559 =
      f().nonfinite == rpsim::NonFinite::ieee && f().subnormals && f().has_sign;
  static inline const int digits = f().precision();
  static inline const int digits10 = int(std::floor((f().precision() - 1) * 0.30102999566398120));
  static inline const int max_digits10 = int(std::ceil(1 + f().precision() * 0.30102999566398120));
  // C's convention: the smallest normal is radix^(min_exponent - 1).
  static inline const int min_exponent = f().emin + 1;
  static inline const int max_exponent = f().emax + 1;
  static inline const int min_exponent10 = int(std::ceil(std::log10(f().min_normal())));
  static inline const int max_exponent10 = int(std::floor(std::log10(f().max_finite())));

  // Fixed point: the smallest positive value, 2^-f (it has no normal range).
  static T min() noexcept {
    if (f().is_fixed_point()) return T::from_bits(1);
    return T::from_bits(f().has_zero ? 1ull << f().man_bits : 0);
  }
  static T max() noexcept { return T::from_bits(f().max_finite_bits(false)); }
  static T lowest() noexcept { return f().has_sign ? T::from_bits(f().max_finite_bits(true)) : min(); }
  // The step after 1: 2^-man_bits, or fixed point's one grid step 2^-f.
  static T epsilon() noexcept {
    return rpsim::detail::exact_value<Tag>(
        std::ldexp(1.0, f().is_fixed_point() ? -f().frac_bits : -f().man_bits));
  }
  static T round_error() noexcept { return rpsim::detail::exact_value<Tag>(0.5); }
  // Formats without infinities answer their largest finite value, formats
  // without NaN zero, as the standard allows when has_infinity/has_quiet_NaN
  // are false.
  static T infinity() noexcept { return f().has_inf() ? T::from_bits(f().inf_bits(false)) : max(); }
  static T quiet_NaN() noexcept {
    return f().has_nan() ? T::from_bits(rpsim::default_nan(f(), rpsim::NanPolicy::arm)) : T::from_bits(0);
  }
  static T signaling_NaN() noexcept {
    if (f().nan != rpsim::NanEncoding::ieee) return quiet_NaN();
    return T::from_bits((f().exp_field_max() << f().man_bits) | 1);
  }
  static T denorm_min() noexcept { return T::from_bits(f().min_positive_bits()); }
};

// Eigen: declared, not included, so that this header needs no Eigen. The
// traits say "a real, non-integer scalar that needs no initialisation"; the
// costs are an emulated operation's, so Eigen unrolls less eagerly.
namespace Eigen {
template <typename T>
struct NumTraits;

template <rpsim::FormatTag Tag>
struct NumTraits<rpsim::Float<Tag>> {
  using T = rpsim::Float<Tag>;
  using Real = T;
  using NonInteger = T;
  using Nested = T;
  using Literal = T;
  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = 1,
    RequireInitialization = 0,
    ReadCost = 1,
    AddCost = 8,
    MulCost = 8
  };

  static T epsilon() { return std::numeric_limits<T>::epsilon(); }
  // Eigen's tolerance for isApprox and friends: 8 ulps of 1 (Eigen uses
  // about 10 for its own half).
  static T dummy_precision() { return rpsim::detail::exact_value<Tag>(8 * double(epsilon())); }
  static T highest() { return std::numeric_limits<T>::max(); }
  static T lowest() { return std::numeric_limits<T>::lowest(); }
  static T infinity() { return std::numeric_limits<T>::infinity(); }
  static T quiet_NaN() { return std::numeric_limits<T>::quiet_NaN(); }
  static int digits10() { return std::numeric_limits<T>::digits10; }
  static int max_digits10() { return std::numeric_limits<T>::max_digits10; }
  static int digits() { return std::numeric_limits<T>::digits; }
  static int min_exponent() { return std::numeric_limits<T>::min_exponent; }
  static int max_exponent() { return std::numeric_limits<T>::max_exponent; }
};
}  // namespace Eigen

// "{}" shortest exact decimal, "{:x}" hex bits, "{:b}" sign/exponent/fraction.
template <rpsim::FormatTag Tag>
struct fmt::formatter<rpsim::Float<Tag>> : fmt::formatter<rpsim::Encoded> {
  template <typename Ctx>
  auto format(const rpsim::Float<Tag>& v, Ctx& ctx) const {
    return fmt::formatter<rpsim::Encoded>::format(rpsim::Encoded{&Tag::format(), v.bits()}, ctx);
  }
};
