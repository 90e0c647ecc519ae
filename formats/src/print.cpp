#include "rpsim/formats/print.hpp"

#include <cmath>

#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/unpacked.hpp"

namespace rpsim {

std::string hex_bits(const Format& f, std::uint64_t bits) {
  return fmt::format("0x{:0{}X}", bits & f.bit_mask(), (f.bits + 3) / 4);
}

std::string binary_fields(const Format& f, std::uint64_t bits) {
  if (f.is_fixed_point()) {
    // Two's complement: the integer bits (sign included), then the fraction
    // bits, where the binary point falls inside the word.
    const std::uint64_t w = bits & f.bit_mask();
    const int frac = f.frac_bits;
    if (frac <= 0 || frac >= f.bits) return fmt::format("{:0{}b}", w, f.bits);
    return fmt::format("{:0{}b} {:0{}b}", w >> frac, f.bits - frac, w & ((1ull << frac) - 1), frac);
  }
  std::string s;
  if (f.has_sign) s += (bits & f.sign_bit()) ? "1 " : "0 ";
  const std::uint64_t field = (bits >> f.man_bits) & f.exp_field_max();
  s += fmt::format("{:0{}b}", field, f.exp_bits);
  if (f.man_bits > 0) s += fmt::format(" {:0{}b}", bits & f.man_mask(), f.man_bits);
  return s;
}

std::string classify(const Format& f, std::uint64_t bits) {
  const Unpacked u = unpack(f, bits);
  switch (u.cls) {
    case Class::zero: return "zero";
    case Class::infinity: return "infinity";
    case Class::quiet_nan: return "quiet NaN";
    case Class::signaling_nan: return "signalling NaN";
    case Class::finite: break;
  }
  if (f.is_fixed_point()) return "fixed point";
  return is_subnormal(f, bits) ? "subnormal" : "normal";
}

std::string decimal(const Format& f, std::uint64_t bits) {
  const double v = to_double(f, bits);
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  return fmt::format("{}", v);
}

}  // namespace rpsim
