// Encodings back to binary64 / binary32, many at a time. Reference:
// convert(binary64 or binary32, fmt, bits) with the default Rounding (exact:
// every format decoded here fits its output). Formats of at most 8 bits go
// through a 256-entry table filled by the reference; wider ones through a bit
// kernel for finite encodings, with the top exponent field (infinities, NaNs
// and their payloads) and the fnuz NaN left to the reference.
#include <array>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "rpsim/formats/array.hpp"
#include "rpsim/formats/ops.hpp"

namespace rpsim {
namespace {

template <class Out>
Out reference_value(const Format& fmt, std::uint64_t bits) {
  Flags f = 0;
  if constexpr (std::is_same_v<Out, double>) {
    return std::bit_cast<double>(convert(formats::binary64(), fmt, bits, Rounding{}, f));
  } else {
    return std::bit_cast<float>(std::uint32_t(convert(formats::binary32(), fmt, bits, Rounding{}, f)));
  }
}

bool fits_binary32(const Format& fmt) {
  return fmt.man_bits <= 23 && fmt.emax <= 127 && fmt.emin - fmt.man_bits >= -149;
}

// Encodings the bit kernel must not decode itself: (bits & mask) == value.
struct SpecialPattern {
  std::uint64_t mask, value;
};

SpecialPattern special_pattern(const Format& fmt) {
  const std::uint64_t magnitude = fmt.bit_mask() & ~fmt.sign_bit();
  switch (fmt.nan) {
    case NanEncoding::ieee: return {fmt.exp_field_max() << fmt.man_bits, fmt.exp_field_max() << fmt.man_bits};
    case NanEncoding::all_ones: return {magnitude, magnitude};
    case NanEncoding::negative_zero: return {fmt.bit_mask(), fmt.sign_bit()};
    case NanEncoding::none: break;
  }
  return {0, 1};  // never matches
}

bool kernel_decodes(const Format& fmt) {
  return !fmt.is_fixed_point() && fmt.has_sign && fmt.has_zero && fmt.subnormals && fmt.emin >= -1022 &&
         fmt.emax <= 1023;
}

// value = man * 2^(emin - m) for exponent field 0, else the fields moved into
// binary64's positions; both exact. Branch-free so that it vectorises.
template <class Bits, class Out>
[[gnu::always_inline]] inline void decode_block(const Format& fmt, const Bits* __restrict bits,
                                                Out* __restrict out, std::size_t n) {
  const int m = fmt.man_bits;
  const std::uint64_t mask = fmt.bit_mask(), man_mask = fmt.man_mask(), field_max = fmt.exp_field_max();
  const int sign_shift = fmt.bits - 1;
  const std::int64_t rebias = 1023 - fmt.bias;
  const double subnormal_scale = std::ldexp(1.0, fmt.emin - m);
  const SpecialPattern sp = special_pattern(fmt);
  bool any_special = false;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t b = std::uint64_t(bits[i]) & mask;
    const std::uint64_t sign = (b >> sign_shift) & 1, man = b & man_mask;
    const std::uint64_t field = (b >> m) & field_max;
    const std::uint64_t normal =
        (sign << 63) | (std::uint64_t(std::int64_t(field) + rebias) << 52) | (man << (52 - m));
    const double sub = double(std::int64_t(man)) * subnormal_scale;
    const double v = field == 0 ? (sign ? -sub : sub) : std::bit_cast<double>(normal);
    out[i] = Out(v);
    any_special |= (b & sp.mask) == sp.value;
  }
  if (any_special) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t b = std::uint64_t(bits[i]) & mask;
      if ((b & sp.mask) == sp.value) out[i] = reference_value<Out>(fmt, b);
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define RPSIM_DECODE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RPSIM_DECODE_CLONES
#endif

RPSIM_DECODE_CLONES void decode_kernel(const Format& fmt, const std::uint16_t* bits, double* out,
                                       std::size_t n) {
  decode_block(fmt, bits, out, n);
}
RPSIM_DECODE_CLONES void decode_kernel(const Format& fmt, const std::uint32_t* bits, double* out,
                                       std::size_t n) {
  decode_block(fmt, bits, out, n);
}
RPSIM_DECODE_CLONES void decode_kernel(const Format& fmt, const std::uint64_t* bits, double* out,
                                       std::size_t n) {
  decode_block(fmt, bits, out, n);
}
RPSIM_DECODE_CLONES void decode_kernel(const Format& fmt, const std::uint16_t* bits, float* out,
                                       std::size_t n) {
  decode_block(fmt, bits, out, n);
}
RPSIM_DECODE_CLONES void decode_kernel(const Format& fmt, const std::uint32_t* bits, float* out,
                                       std::size_t n) {
  decode_block(fmt, bits, out, n);
}

template <class Bits, class Out>
void decode_array(const Format& fmt, std::span<const Bits> bits, std::span<Out> out) {
  const std::string who = "decode(" + fmt.name + "): ";
  if (bits.size() != out.size()) {
    throw std::invalid_argument(who + "input has " + std::to_string(bits.size()) + " elements, output " +
                                std::to_string(out.size()));
  }
  if (std::is_same_v<Out, float> && !fits_binary32(fmt)) {
    throw std::invalid_argument(who + "format " + fmt.name +
                                " has values that binary32 cannot hold; decode to binary64");
  }
  if (fmt.is_fixed_point() && fmt.bits > 8) {
    // The word's integer (sign-extended) times 2^-f: exact, as the format
    // holds at most 53 significant bits.
    const double scale = std::ldexp(1.0, -fmt.frac_bits);
    const int unused = 64 - fmt.bits;
    for (std::size_t i = 0; i < bits.size(); ++i) {
      const auto k = std::int64_t(std::uint64_t(bits[i]) << unused) >> unused;
      out[i] = Out(double(k) * scale);
    }
    return;
  }
  if (fmt.bits <= 8) {
    std::array<Out, 256> table;
    for (std::uint64_t b = 0; b < 256; ++b) table[b] = reference_value<Out>(fmt, b & fmt.bit_mask());
    for (std::size_t i = 0; i < bits.size(); ++i)
      out[i] = table[std::uint64_t(bits[i]) & 0xFF & fmt.bit_mask()];
    return;
  }
  if constexpr (!std::is_same_v<Bits, std::uint8_t>) {
    if (kernel_decodes(fmt) && fmt.man_bits <= 52) {
      decode_kernel(fmt, bits.data(), out.data(), bits.size());
      return;
    }
  }
  for (std::size_t i = 0; i < bits.size(); ++i)
    out[i] = reference_value<Out>(fmt, std::uint64_t(bits[i]) & fmt.bit_mask());
}

}  // namespace

void decode(const Format& fmt, std::span<const std::uint8_t> bits, std::span<double> out) {
  decode_array(fmt, bits, out);
}
void decode(const Format& fmt, std::span<const std::uint16_t> bits, std::span<double> out) {
  decode_array(fmt, bits, out);
}
void decode(const Format& fmt, std::span<const std::uint32_t> bits, std::span<double> out) {
  decode_array(fmt, bits, out);
}
void decode(const Format& fmt, std::span<const std::uint64_t> bits, std::span<double> out) {
  decode_array(fmt, bits, out);
}
void decode(const Format& fmt, std::span<const std::uint8_t> bits, std::span<float> out) {
  decode_array(fmt, bits, out);
}
void decode(const Format& fmt, std::span<const std::uint16_t> bits, std::span<float> out) {
  decode_array(fmt, bits, out);
}
void decode(const Format& fmt, std::span<const std::uint32_t> bits, std::span<float> out) {
  decode_array(fmt, bits, out);
}

}  // namespace rpsim
