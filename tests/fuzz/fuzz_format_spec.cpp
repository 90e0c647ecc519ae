// Custom format specs ("e5m10", "e4m3fnuz", "exp=5,man=10,bias=15,...") must
// be rejected with FormatError or give a format that works: a spec that
// parses is then run through the differential check against the MPFR
// reference (conversion from binary64 and every arithmetic operation, six
// rounding modes) on operands taken from the input.
//
// Input: spec text, then a NUL byte, then 8-byte operand patterns.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "differential_check.hpp"
#include "mpfr_reference.hpp"
#include "rpsim/formats/format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static rpsim::fuzz::Reference ref;
  const auto* nul = static_cast<const std::uint8_t*>(std::memchr(data, 0, size));
  const std::size_t spec_len = nul ? std::size_t(nul - data) : size;
  const std::string_view spec(reinterpret_cast<const char*>(data), spec_len);
  rpsim::Format f;
  try {
    f = rpsim::parse_format(spec);
  } catch (const rpsim::FormatError&) {
    return 0;
  }
  const int width = int(f.has_sign) + f.exp_bits + f.man_bits;
  if (width > 64 || width != f.bits || f.emax < f.emin || f.precision() > 53) std::abort();
  std::uint64_t x[3] = {0, 0, 0};
  std::size_t at = spec_len + 1;
  constexpr rpsim::RoundingMode kModes[] = {
      rpsim::RoundingMode::nearest_even, rpsim::RoundingMode::nearest_away, rpsim::RoundingMode::toward_zero,
      rpsim::RoundingMode::down,         rpsim::RoundingMode::up,           rpsim::RoundingMode::odd};
  while (at + 24 <= size) {
    for (int k = 0; k < 3; ++k) {
      std::uint64_t v = 0;
      for (int i = 0; i < 8; ++i) v = v << 8 | data[at + 8 * k + i];
      x[k] = v;
    }
    at += 24;
    const std::uint64_t mask = rpsim::fuzz::width_mask(f);
    std::uint64_t in[3] = {x[0] & mask, x[1] & mask, x[2] & mask};
    for (rpsim::RoundingMode mode : kModes) {
      rpsim::Rounding r;
      r.mode = mode;
      rpsim::fuzz::check(ref, rpsim::fuzz::RefOp::convert, f, rpsim::formats::binary64(), x, r);
      for (int op = 0; op < rpsim::fuzz::kRefOpCount; ++op)
        if (rpsim::fuzz::RefOp(op) != rpsim::fuzz::RefOp::convert)
          rpsim::fuzz::check(ref, rpsim::fuzz::RefOp(op), f, f, in, r);
    }
  }
  return 0;
}
