// The single rounding routine: an exact (sign, significand, exponent, sticky)
// value to an encoding of any format, in any mode, with IEEE flags. The
// arithmetic is the shared scalar core (scalar_core.hpp, the CUDA backend's
// too); this file holds its host entry points and the rounding-mode table.
#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/scalar_convert.hpp"

namespace rpsim {

std::uint64_t round_pack(const Format& fmt, bool sign, std::int64_t exponent, u128 sig, bool sticky,
                         const Rounding& rnd, Flags& flags) {
  return hd::round_pack(fmt, sign, exponent, sig, sticky, rounding_desc(rnd), flags);
}

std::uint64_t round_double(const Format& fmt, double value, const Rounding& rnd, Flags& flags) {
  return hd::round_binary64(fmt, value, rounding_desc(rnd), flags);
}

double to_double(const Format& fmt, std::uint64_t bits) {
  return hd::to_double(fmt, bits);
}

namespace {
// Aliases: the spelled-out enumerator, and SoftFloat's softfloat_round_* /
// TestFloat's -r names.
constexpr RoundingModeInfo kRoundingModes[] = {
    {RoundingMode::nearest_even,
     "rne",
     {"nearest_even", "near_even", ""},
     "round to nearest, ties to even (IEEE 754 roundTiesToEven)"},
    {RoundingMode::nearest_away,
     "rna",
     {"nearest_away", "near_maxMag", ""},
     "round to nearest, ties away from zero (roundTiesToAway)"},
    {RoundingMode::toward_zero, "rtz", {"toward_zero", "minMag", ""}, "toward zero (roundTowardZero)"},
    {RoundingMode::down, "rd", {"down", "min", ""}, "toward -infinity (roundTowardNegative)"},
    {RoundingMode::up, "ru", {"up", "max", ""}, "toward +infinity (roundTowardPositive)"},
    {RoundingMode::odd, "rodd", {"odd", "", ""}, "round to odd (SoftFloat's softfloat_round_odd)"},
    {RoundingMode::stochastic,
     "sr",
     {"stochastic", "", ""},
     "stochastic: k random bits compared with the discarded ones"},
};
}  // namespace

std::span<const RoundingModeInfo> rounding_modes() {
  return kRoundingModes;
}

std::string rounding_names(std::string_view separator, bool deterministic) {
  std::string out;
  for (const auto& r : kRoundingModes) {
    if (deterministic && r.mode == RoundingMode::stochastic) continue;
    if (!out.empty()) out += separator;
    out += r.name;
  }
  return out;
}

RoundingMode parse_rounding(std::string_view name) {
  for (const auto& r : kRoundingModes) {
    if (name == r.name) return r.mode;
    for (const auto a : r.aliases)
      if (!a.empty() && name == a) return r.mode;
  }
  throw FormatError("rounding mode '" + std::string(name) + "': unknown (expected one of " +
                    rounding_names(", ") + ")");
}

std::string_view rounding_name(RoundingMode mode) {
  for (const auto& r : kRoundingModes)
    if (r.mode == mode) return r.name;
  return "?";
}

}  // namespace rpsim
