#include "rpsim/formats/unpacked.hpp"

namespace rpsim {

namespace {

// Two's complement: the word's integer k, value k * 2^-f.
Unpacked unpack_fixed(const Format& fmt, std::uint64_t bits) {
  Unpacked u;
  if (bits == 0) return u;
  u.cls = Class::finite;
  u.sign = (bits & fmt.sign_bit()) != 0;
  u.significand = u.sign ? (~bits + 1) & fmt.bit_mask() : bits;  // -2^(w-1): 2^(w-1)
  u.exponent = -std::int64_t(fmt.frac_bits);
  return u;
}

}  // namespace

Unpacked unpack(const Format& fmt, std::uint64_t bits, bool flush_subnormals) {
  Unpacked u;
  bits &= fmt.bit_mask();
  if (fmt.is_fixed_point()) return unpack_fixed(fmt, bits);
  const std::uint64_t man = bits & fmt.man_mask();
  const std::uint64_t field = (bits >> fmt.man_bits) & fmt.exp_field_max();
  u.sign = fmt.has_sign && (bits & fmt.sign_bit());
  const int p = fmt.precision();

  // A NaN's fraction field read the IEEE way whatever the encoding: the top
  // fraction bit is the quiet bit, the rest the payload, aligned to bit 63.
  // So OCP E4M3's S.1111.111 carries payload 11 and widens as an IEEE NaN
  // with those bits would (E4M3 0x7F -> binary32 0x7FF00000, as binary16
  // 0x7E01 -> 0x7FC02000); E8M0's 0xFF and the fnuz formats' -0 pattern have
  // no payload bits. README "NaN conventions" states the rule.
  auto make_nan = [&](bool quiet) {
    u.cls = quiet ? Class::quiet_nan : Class::signaling_nan;
    if (fmt.nan != NanEncoding::negative_zero && fmt.man_bits > 1)
      u.payload = (man & (fmt.man_mask() >> 1)) << (64 - (fmt.man_bits - 1));
    return u;
  };

  switch (fmt.nan) {
    case NanEncoding::ieee:
      if (field == fmt.exp_field_max()) {
        if (man == 0) {
          u.cls = Class::infinity;
          return u;
        }
        return make_nan((man >> (fmt.man_bits - 1)) & 1);
      }
      break;
    case NanEncoding::all_ones:
      if (field == fmt.exp_field_max() && man == fmt.man_mask()) return make_nan(true);
      break;
    case NanEncoding::negative_zero:
      if (bits == fmt.sign_bit()) {
        u.sign = false;
        return make_nan(true);
      }
      break;
    case NanEncoding::none: break;
  }
  if (field == 0 && fmt.has_zero) {
    if (man == 0 || flush_subnormals || !fmt.subnormals) {
      u.cls = Class::zero;
      return u;
    }
    u.cls = Class::finite;
    u.significand = man;
    u.exponent = std::int64_t(fmt.emin) - (p - 1);
    return u;
  }
  u.cls = Class::finite;
  u.significand = man | (std::uint64_t(1) << fmt.man_bits);
  u.exponent = std::int64_t(field) - fmt.bias - (p - 1);
  return u;
}

bool is_subnormal(const Format& fmt, std::uint64_t bits) {
  if (!fmt.has_zero || !fmt.subnormals || fmt.is_fixed_point()) return false;
  const std::uint64_t field = (bits >> fmt.man_bits) & fmt.exp_field_max();
  return field == 0 && (bits & fmt.man_mask()) != 0;
}

bool is_nan(const Format& fmt, std::uint64_t bits) {
  return unpack(fmt, bits).is_nan();
}

bool is_signaling_nan(const Format& fmt, std::uint64_t bits) {
  return unpack(fmt, bits).cls == Class::signaling_nan;
}

}  // namespace rpsim
