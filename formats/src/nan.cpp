// How NaNs look: the one place that knows (SoftFloat keeps this in its
// per-platform specialization folder).
#include "rpsim/formats/unpacked.hpp"

namespace rpsim {
namespace {

std::uint64_t quiet_bit(const Format& fmt) {
  return std::uint64_t(1) << (fmt.man_bits - 1);
}

std::uint64_t canonical_nan(const Format& fmt, bool negative) {
  switch (fmt.nan) {
    case NanEncoding::ieee:
      return (negative ? fmt.sign_bit() : 0) | (fmt.exp_field_max() << fmt.man_bits) | quiet_bit(fmt);
    case NanEncoding::all_ones:
      return (negative ? fmt.sign_bit() : 0) | (fmt.exp_field_max() << fmt.man_bits) | fmt.man_mask();
    case NanEncoding::negative_zero: return fmt.sign_bit();
    case NanEncoding::none: break;
  }
  // No NaN in this format (OCP MX FP6/FP4): the value is lost; return +0 and
  // let the caller's invalid flag say so.
  return 0;
}

std::uint64_t quieted(const Format& fmt, std::uint64_t bits) {
  return fmt.nan == NanEncoding::ieee ? bits | quiet_bit(fmt) : bits;
}

}  // namespace

std::uint64_t default_nan(const Format& fmt, NanPolicy policy) {
  return canonical_nan(fmt, policy == NanPolicy::x86_sse);
}

std::uint64_t nan_from(const Format& fmt, const Unpacked& nan, NanPolicy policy) {
  if (policy == NanPolicy::riscv || fmt.nan != NanEncoding::ieee) {
    if (policy == NanPolicy::riscv) return default_nan(fmt, policy);
    return canonical_nan(fmt, nan.sign);
  }
  // Keep the top payload bits, as SoftFloat's common-NaN conversions and
  // hardware do.
  std::uint64_t man = fmt.man_bits > 1 ? nan.payload >> (64 - (fmt.man_bits - 1)) : 0;
  return (nan.sign ? fmt.sign_bit() : 0) | (fmt.exp_field_max() << fmt.man_bits) | quiet_bit(fmt) | man;
}

std::uint64_t propagate_nan(const Format& fmt, std::uint64_t a, std::uint64_t b, NanPolicy policy,
                            Flags& flags) {
  const Unpacked ua = unpack(fmt, a), ub = unpack(fmt, b);
  const bool sa = ua.cls == Class::signaling_nan, sb = ub.cls == Class::signaling_nan;
  if (sa || sb) flags |= flag_invalid;
  switch (policy) {
    case NanPolicy::x86_sse:
      // SoftFloat 8086-SSE s_propagateNaN: a signalling a wins, then the
      // first NaN operand.
      if (sa) return quieted(fmt, a);
      return quieted(fmt, ua.is_nan() ? a : b);
    case NanPolicy::arm:
      if (sa) return quieted(fmt, a);
      if (sb) return quieted(fmt, b);
      return quieted(fmt, ua.is_nan() ? a : b);
    case NanPolicy::riscv: break;
  }
  return default_nan(fmt, policy);
}

}  // namespace rpsim
