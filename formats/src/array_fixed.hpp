// The array kernel of the signed Q formats (fixed point), which round on one
// grid and need none of the floating-point kernel's exponent handling.
// array_round.cpp decides where it applies (make_plan). Internal to formats/.
#pragma once

#include "array_kernel.hpp"

namespace rpsim::array_detail {

// round_pack_fixed (round.cpp) element by element: |x| is rounded on the grid
// 2^-f as decide() rounds it (sign and magnitude, so the directed modes and
// stochastic rounding see |x| and the sign, as the scalar core does), then
// saturated at 2^(w-1) - 1 units above zero and 2^(w-1) below, and a zero
// result is the one zero, +0. NaN, infinity and subnormal inputs go to the
// scalar core. make_plan chooses this only for word lengths up to 51, so
// the shift below is at least 1 wherever the result is not saturated anyway.
template <int Kind, class In, class Out>
[[gnu::always_inline]] inline void fixed_block(const KernelParams& kp, const In* __restrict in,
                                               Out* __restrict out, std::size_t n, std::uint64_t index0) {
  const BlockConstants<RuntimeFormat> c(kp);  // decide_rounding's mode and random-bit constants
  constexpr std::uint64_t implicit = std::uint64_t(1) << 52;
  const std::int64_t frac = kp.fixed_frac_bits;
  // |x| >= 2^(w - f) lies beyond both ends whatever the rounding (round_pack_fixed's first test).
  const std::int64_t saturating_exponent = std::int64_t(kp.bits) - frac;
  const std::uint64_t limit_positive = (std::uint64_t(1) << (kp.bits - 1)) - 1;
  const std::uint64_t word_mask = (std::uint64_t(1) << kp.bits) - 1;
  const double grid = kp.fixed_grid;  // 2^-f
  std::uint64_t any_special = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t special;
    const std::uint64_t x = input_bits(in[i], special);
    any_special |= special;
    const std::uint64_t sign = x >> 63;
    const std::uint64_t field = (x >> 52) & 0x7FF;
    const std::int64_t E = std::int64_t(field) - 1023;
    const std::uint64_t sig = (x & (implicit - 1)) | (field != 0 ? implicit : 0);
    const std::int64_t shift = 52 - frac - E;  // |x| = sig 2^-shift grid units
    std::uint64_t kept, up;
    decide_rounding<Kind>(c, sig, shift > 1 ? shift : 1, sign, index0 + i, kept, up);
    const std::uint64_t limit = limit_positive + sign;
    std::uint64_t units = kept + up;
    units = (E >= saturating_exponent ? 1 : 0) | (units > limit ? 1 : 0) ? limit : units;
    if constexpr (std::is_floating_point_v<Out>) {
      // units < 2^52 and f <= 1074: units 2^-f is a binary64 value, so exact.
      const std::uint64_t v = std::bit_cast<std::uint64_t>(double(std::int64_t(units)) * grid);
      out[i] = Out(std::bit_cast<double>(v | ((units != 0 ? sign : 0) << 63)));
    } else {
      out[i] = Out(((sign ? 0 - units : units)) & word_mask);  // two's complement
    }
  }
  // (No FTZ here: make_plan leaves flushing to the scalar core.)
  if (any_special) redo_specials(kp, c.emin, in, out, n, index0);
}

}  // namespace rpsim::array_detail
