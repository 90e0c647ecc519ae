// Rounding modes, exception flags, and the one rounding routine that every
// operation and conversion ends in.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "rpsim/formats/format.hpp"

namespace rpsim {

using u128 = unsigned __int128;

enum class RoundingMode : std::uint8_t {
  nearest_even,
  nearest_away,
  toward_zero,
  down,
  up,
  odd,  // round to odd ("jamming"), as SoftFloat's softfloat_round_odd
  stochastic
};

// The rounding-mode table: one row per mode, from which parsing, names, the
// CLI's help text and error messages are generated. Adding a mode is a row
// here, its case in round_pack, and its tests.
struct RoundingModeInfo {
  RoundingMode mode;
  std::string_view name;                    // short name on the command line
  std::array<std::string_view, 3> aliases;  // spelled-out, SoftFloat / TestFloat names
  std::string_view description;
};
std::span<const RoundingModeInfo> rounding_modes();

// Short names as on the command line: rne rna rtz rd ru rodd sr (or any alias).
RoundingMode parse_rounding(std::string_view name);  // throws FormatError listing the names
std::string_view rounding_name(RoundingMode mode);
// The short names joined by `separator` ("rne rna rtz rd ru rodd sr"); with
// deterministic = true, stochastic rounding is left out.
std::string rounding_names(std::string_view separator = " ", bool deterministic = false);

// IEEE 754 exception flags; the bit values are TestFloat's.
enum Flag : std::uint8_t {
  flag_inexact = 0x01,
  flag_underflow = 0x02,
  flag_overflow = 0x04,
  flag_infinite = 0x08,  // division by zero
  flag_invalid = 0x10,
};
using Flags = std::uint8_t;

// Which NaN an operation returns. SoftFloat keeps this in one specialization
// folder; here it is one switch read by nan.cpp alone.
enum class NanPolicy : std::uint8_t {
  x86_sse,  // default NaN has the sign set; first NaN operand returned, quieted
  arm,      // default NaN positive; a signalling operand wins over a quiet one
  riscv     // always the canonical positive default NaN, no propagation
};

struct Rounding {
  RoundingMode mode = RoundingMode::nearest_even;
  bool flush_subnormal_inputs = false;   // DAZ: subnormal operands read as zero
  bool flush_subnormal_outputs = false;  // FTZ: tiny results become zero
  std::optional<Overflow> overflow;      // unset: the format's own default
  NanPolicy nan_policy = NanPolicy::x86_sse;
  int stochastic_bits = 32;       // random bits compared with the discarded fraction
  std::uint64_t random_bits = 0;  // the draw used by the next stochastic rounding
};

// The exact value (-1)^sign * significand * 2^exponent, with `sticky` standing
// for non-zero bits below the significand's last bit. Rounds it to `fmt`,
// accumulating flags, and returns the encoding. significand may be 0 (exact
// zero, or only-sticky).
std::uint64_t round_pack(const Format& fmt, bool sign, std::int64_t exponent, u128 significand, bool sticky,
                         const Rounding& rnd, Flags& flags);

// Rounds a binary64 value (NaN and infinities included) to `fmt`.
std::uint64_t round_double(const Format& fmt, double value, const Rounding& rnd, Flags& flags);
inline std::uint64_t round_double(const Format& fmt, double value,
                                  RoundingMode mode = RoundingMode::nearest_even) {
  Flags f = 0;
  Rounding r;
  r.mode = mode;
  return round_double(fmt, value, r, f);
}

// The exact value of an encoding as binary64 (every format up to binary64 fits).
double to_double(const Format& fmt, std::uint64_t bits);

}  // namespace rpsim
