// The array rounding kernel shared by the per-ISA translation units
// (array_round.cpp: portable, array_round_avx2.cpp, array_round_avx512.cpp).
// Internal to formats/.
//
// One element: take the binary64 bits (binary32 input is widened exactly with
// integer operations), compute the exponent of the last kept bit as round_pack
// does (max(E, emin) - (p - 1)), shift the 53-bit significand right by the
// resulting amount and decide the rounding from the discarded bits exactly as
// round.cpp's decide(). The encoding's magnitude is then
// ((max(E, emin) - emin) << man_bits) + kept + up, which is monotone in the
// value, so overflow is `code > max_code` and the carry into the next binade
// or out of the subnormals needs no special case. Everything is branch-free
// so that the compiler vectorises the loop; NaN, infinity, subnormal inputs
// and the FTZ tininess boundary (E = emin - 1) are flagged "special" and
// recomputed by the scalar core afterwards.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "rpsim/formats/array.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/random.hpp"

namespace rpsim::array_detail {

// Everything a kernel needs, computed once per call (array_round.cpp).
struct KernelParams {
  int man_bits = 0;
  int emin = 0;
  int bits = 0;
  std::uint64_t max_code = 0;  // magnitude encoding of the largest finite value
  // What the scalar core returns for a zero result and an overflowing one,
  // indexed by sign (both depend only on format, mode, policy and sign).
  std::uint64_t zero_bits[2] = {0, 0};
  std::uint64_t overflow_bits[2] = {0, 0};
  double zero_value[2] = {0, 0};
  double overflow_value[2] = {0, 0};
  RoundingMode mode = RoundingMode::nearest_even;
  bool ftz = false;
  // The exact paths (identity_block, binary32_block), when they apply.
  bool identity = false;
  bool hardware_binary32 = false;
  // The fixed-point kernel (array_fixed.hpp), when it applies: the fraction
  // length f and the grid 2^-f.
  bool fixed_point = false;
  int fixed_frac_bits = 0;
  double fixed_grid = 0;
  int stochastic_bits = 32;
  std::uint64_t key = 0;  // mix64(seed ^ mix64(stream)), see counter_random
  // For the scalar core on special elements.
  const Format* fmt = nullptr;
  Rounding rounding;
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
};

template <class In, class Out>
using KernelFn = void (*)(const KernelParams&, const In* in, Out* out, std::size_t n, std::uint64_t index0);

// The scalar reference for one element; index is the element's absolute
// counter (first_index + position).
template <class In, class Out>
Out reference_element(const KernelParams& kp, In x, std::uint64_t index) {
  Rounding r = kp.rounding;
  r.random_bits = counter_random(kp.seed, kp.stream, index);
  Flags flags = 0;
  std::uint64_t bits;
  if constexpr (std::is_same_v<In, double>)
    bits = round_double(*kp.fmt, x, r, flags);
  else
    bits = convert(*kp.fmt, formats::binary32(), std::bit_cast<std::uint32_t>(x), r, flags);
  if constexpr (std::is_same_v<Out, double>) {
    return std::bit_cast<double>(convert(formats::binary64(), *kp.fmt, bits, Rounding{}, flags));
  } else if constexpr (std::is_same_v<Out, float>) {
    return std::bit_cast<float>(
        std::uint32_t(convert(formats::binary32(), *kp.fmt, bits, Rounding{}, flags)));
  } else {
    return Out(bits);
  }
}

// Compile-time format parameters for the hot named formats; man_bits < 0
// means "read them from KernelParams".
struct RuntimeFormat {
  static constexpr int man_bits = -1, emin = 0, bits = 0;
  static constexpr std::uint64_t max_code = 0;
};
struct Binary16Format {
  static constexpr int man_bits = 10, emin = -14, bits = 16;
  static constexpr std::uint64_t max_code = 0x7BFF;
};
struct Bfloat16Format {
  static constexpr int man_bits = 7, emin = -126, bits = 16;
  static constexpr std::uint64_t max_code = 0x7F7F;
};

enum ModeKind : int { kind_rne = 0, kind_rtz = 1, kind_sr = 2, kind_other = 3 };

inline int mode_kind(RoundingMode mode) {
  switch (mode) {
    case RoundingMode::nearest_even: return kind_rne;
    case RoundingMode::toward_zero: return kind_rtz;
    case RoundingMode::stochastic: return kind_sr;
    default: return kind_other;
  }
}

// The binary64 bits of an input value: binary32 is widened exactly with
// integer operations (zeros and normal numbers; the rest is special). Sets
// `special` (0 or 1) for what the kernel leaves to the scalar core: NaN,
// infinity and subnormal inputs. Written with unsigned compares rather than
// && and || so that GCC if-converts and vectorises the loop.
[[gnu::always_inline]] inline std::uint64_t input_bits(double x, std::uint64_t& special) {
  const std::uint64_t b = std::bit_cast<std::uint64_t>(x);
  const std::uint64_t a2 = b << 1;  // magnitude, shifted: 0 for zeros
  special = std::uint64_t(a2 - 1 < (std::uint64_t(1) << 53) - 1) | std::uint64_t(a2 >= 0xFFE0000000000000ull);
  return b;
}
[[gnu::always_inline]] inline std::uint64_t input_bits(float x, std::uint64_t& special) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t a2 = f << 1;
  special = std::uint64_t(a2 - 1 < (std::uint32_t(1) << 24) - 1) | std::uint64_t(a2 >= 0xFF000000u);
  const std::uint64_t field = (f >> 23) & 0xFF;
  const std::uint64_t magnitude =
      field == 0 ? 0 : ((field + (1023 - 127)) << 52) | (std::uint64_t(f & 0x7FFFFF) << 29);
  return (std::uint64_t(f >> 31) << 63) | magnitude;
}

// The per-call constants of round_block in the shapes its loop uses; a
// local of the kernel, so GCC keeps every field in a register.
template <class Fixed>
struct BlockConstants {
  static constexpr bool fixed = Fixed::man_bits >= 0;
  std::uint64_t m;
  std::int64_t emin;
  std::uint64_t sign_shift, max_code;
  std::int64_t base_shift;
  std::uint64_t ftz, k, k_mask, key;
  // Picking by sign with xor masks: a `sign ? a : b` on top of another
  // select leaves a branch that stops vectorisation.
  std::uint64_t zero_pos, zero_diff, over_pos, over_diff;
  std::uint64_t zero_value_pos, zero_value_diff, over_value_pos, over_value_diff;
  std::uint64_t away, down, upward, odd;

  [[gnu::always_inline]] explicit BlockConstants(const KernelParams& kp)
      : m(std::uint64_t(fixed ? Fixed::man_bits : kp.man_bits)),
        emin(fixed ? Fixed::emin : kp.emin),
        sign_shift(std::uint64_t((fixed ? Fixed::bits : kp.bits) - 1)),
        max_code(fixed ? Fixed::max_code : kp.max_code),
        base_shift(52 - std::int64_t(m)),
        ftz(kp.ftz ? 1 : 0),
        k(std::uint64_t(kp.stochastic_bits)),
        k_mask((std::uint64_t(1) << k) - 1),
        key(kp.key),
        zero_pos(kp.zero_bits[0]),
        zero_diff(kp.zero_bits[0] ^ kp.zero_bits[1]),
        over_pos(kp.overflow_bits[0]),
        over_diff(kp.overflow_bits[0] ^ kp.overflow_bits[1]),
        zero_value_pos(std::bit_cast<std::uint64_t>(kp.zero_value[0])),
        zero_value_diff(zero_value_pos ^ std::bit_cast<std::uint64_t>(kp.zero_value[1])),
        over_value_pos(std::bit_cast<std::uint64_t>(kp.overflow_value[0])),
        over_value_diff(over_value_pos ^ std::bit_cast<std::uint64_t>(kp.overflow_value[1])),
        away(kp.mode == RoundingMode::nearest_away ? 1 : 0),
        down(kp.mode == RoundingMode::down ? 1 : 0),
        upward(kp.mode == RoundingMode::up ? 1 : 0),
        odd(kp.mode == RoundingMode::odd ? 1 : 0) {}
};

// decide(): the kept significand bits and whether to add one ulp, from the
// 53-bit significand shifted right by `shift` (>= 1: man_bits <= 51).
template <int Kind, class C>
[[gnu::always_inline]] inline void decide_rounding(const C& c, std::uint64_t sig, std::int64_t shift,
                                                   std::uint64_t sign, std::uint64_t index,
                                                   std::uint64_t& kept, std::uint64_t& up) {
  constexpr std::uint64_t half = std::uint64_t(1) << 63;
  if constexpr (Kind == kind_sr) {
    // The discarded fraction truncated to k bits plus k random bits; up iff
    // the sum reaches 2^k. frac64 is the discarded fraction's top 64 bits
    // (sig < 2^53, so a shift of 63 or more keeps nothing).
    kept = sig >> std::uint64_t(shift < 63 ? shift : 63);
    const std::uint64_t frac64 = shift <= 64   ? sig << std::uint64_t(64 - shift)
                                 : shift < 128 ? sig >> std::uint64_t(shift - 64)
                                               : 0;
    const std::uint64_t r = mix64(c.key ^ index) & c.k_mask;
    up = ((frac64 >> (64 - c.k)) + r) >> c.k;
  } else {
    // Beyond 54 every discarded pattern is "below half, inexact" (sig < 2^53).
    const std::uint64_t s = std::uint64_t(shift < 54 ? shift : 54);
    kept = sig >> s;
    const std::uint64_t rem = sig << (64 - s);  // discarded bits, aligned to the top
    if constexpr (Kind == kind_rne) {
      up = rem > half ? 1 : (rem == half ? (kept & 1) : 0);
    } else if constexpr (Kind == kind_rtz) {
      up = 0;
    } else {
      const std::uint64_t inexact = rem != 0 ? 1 : 0;
      up = (c.away & (rem >= half ? 1 : 0)) | (c.down & inexact & sign) | (c.upward & inexact & (sign ^ 1));
      kept |= c.odd & inexact;
    }
  }
}

// The output element for magnitude encoding `code` (significand `mag`,
// exponent Eb): the value or the encoding, or the scalar core's answer for
// zero and overflow.
template <class Out, class C>
[[gnu::always_inline]] inline Out output_element(const C& c, std::uint64_t sign, std::uint64_t code,
                                                 std::uint64_t mag, std::int64_t Eb) {
  const bool is_zero = code == 0, is_over = code > c.max_code;
  const std::uint64_t sign_mask = 0 - sign;
  if constexpr (std::is_floating_point_v<Out>) {
    // mag * 2^(Eb - m): mag as a double via the 2^52 trick (exact, mag <=
    // 2^52), then the exponent moved by integer addition (stays normal:
    // emin - man_bits >= -1022 is checked before this kernel is chosen). The
    // subtraction vectorises only without -ftrapping-math (CMakeLists.txt).
    const double md = std::bit_cast<double>(0x4330000000000000ull | mag) - 4503599627370496.0;
    const std::uint64_t vb =
        (std::bit_cast<std::uint64_t>(md) + (std::uint64_t(Eb - std::int64_t(c.m)) << 52)) | (sign << 63);
    std::uint64_t v = is_over ? c.over_value_pos ^ (c.over_value_diff & sign_mask) : vb;
    v = is_zero ? c.zero_value_pos ^ (c.zero_value_diff & sign_mask) : v;
    return Out(std::bit_cast<double>(v));
  } else {
    std::uint64_t res = (sign << c.sign_shift) | code;
    res = is_over ? c.over_pos ^ (c.over_diff & sign_mask) : res;
    res = is_zero ? c.zero_pos ^ (c.zero_diff & sign_mask) : res;
    return Out(res);
  }
}

// The elements round_block flagged: NaN, infinity, subnormal inputs and the
// FTZ tininess boundary, recomputed by the scalar core.
template <class In, class Out>
[[gnu::always_inline]] inline void redo_specials(const KernelParams& kp, std::int64_t emin, const In* in,
                                                 Out* out, std::size_t n, std::uint64_t index0) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t special;
    const std::uint64_t x = input_bits(in[i], special);
    const std::int64_t E = std::int64_t((x >> 52) & 0x7FF) - 1023;
    if (special || (kp.ftz && E == emin - 1)) out[i] = reference_element<In, Out>(kp, in[i], index0 + i);
  }
}

// GCC 12 quirks that decide whether this loop vectorises at all: no shift of
// a constant by a per-element count (so the discarded bits are aligned to the
// top of a word instead of masked), shift counts of the operand's width, no
// bool in the arithmetic, no && / || (they become branches). The helpers
// above are always inlined into it.
template <class Fixed, int Kind, class In, class Out>
[[gnu::always_inline]] inline void round_block(const KernelParams& kp, const In* __restrict in,
                                               Out* __restrict out, std::size_t n, std::uint64_t index0) {
  const BlockConstants<Fixed> c(kp);
  constexpr std::uint64_t implicit = std::uint64_t(1) << 52;
  std::uint64_t any_special = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t special;
    const std::uint64_t x = input_bits(in[i], special);
    const std::uint64_t sign = x >> 63;
    const std::uint64_t field = (x >> 52) & 0x7FF;
    const std::int64_t E = std::int64_t(field) - 1023;
    const std::uint64_t sig = (x & (implicit - 1)) | (field != 0 ? implicit : 0);
    const std::int64_t extra = c.emin - E > 0 ? c.emin - E : 0;  // into the subnormals
    const std::int64_t Eb = E + extra;                           // max(E, emin)
    std::uint64_t kept, up;
    decide_rounding<Kind>(c, sig, c.base_shift + extra, sign, index0 + i, kept, up);
    const std::uint64_t mag = kept + up;  // significand of the result, <= 2^(m+1)
    std::uint64_t code = (std::uint64_t(Eb - c.emin) << c.m) + mag;
    // FTZ: tiny before rounding (E < emin - 1) is tiny after it too; E = emin - 1
    // may round up to the smallest normal: round_pack decides that one.
    special |= c.ftz & (E == c.emin - 1 ? 1 : 0);
    code &= (c.ftz & (E < c.emin - 1 ? 1 : 0)) - 1;
    any_special |= special;
    out[i] = output_element<Out>(c, sign, code, mag, Eb);
  }
  if (any_special) redo_specials(kp, c.emin, in, out, n, index0);
}

}  // namespace rpsim::array_detail
