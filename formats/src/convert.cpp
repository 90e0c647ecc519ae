// Conversions: the shared scalar core's (scalar_convert.hpp), whose fast
// path rounds the significand in one 64-bit word where unpack + round_pack's
// u128 path cost ~19 ns (the long binary32 test's whole load).
#include "rpsim/formats/convert_paths.hpp"
#include "rpsim/formats/ops.hpp"
#include "rpsim/formats/scalar_convert.hpp"

namespace rpsim {

bool convert_fast_applies(const Format& to, const Format& from, const Rounding& r) {
  return hd::convert_fast_applies(to, from, rounding_desc(r));
}

std::optional<std::uint64_t> convert_fast(const Format& to, const Format& from, std::uint64_t bits,
                                          const Rounding& r, Flags& fl) {
  std::uint64_t out = 0;
  if (hd::try_convert_fast(to, from, bits, rounding_desc(r), fl, out)) return out;
  return std::nullopt;
}

std::uint64_t convert_general(const Format& to, const Format& from, std::uint64_t bits, const Rounding& r,
                              Flags& fl) {
  return hd::convert_general(to, from, bits, rounding_desc(r), fl);
}

std::uint64_t convert(const Format& to, const Format& from, std::uint64_t bits, const Rounding& r,
                      Flags& fl) {
  return hd::convert(to, from, bits, rounding_desc(r), fl);
}

}  // namespace rpsim
