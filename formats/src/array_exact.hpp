// The two exact paths of array rounding, which need no bit arithmetic:
// the identity, and binary64 -> binary32 by the conversion instruction.
// array_round.cpp decides where they apply (make_plan). Internal to formats/.
#pragma once

#include "array_kernel.hpp"

namespace rpsim::array_detail {

// The identity: the format holds every value of the input type (binary64
// for binary64 input, binary32 for binary32 input), so a value rounds to
// itself in every mode. Non-finite inputs, and subnormal ones under FTZ or
// DAZ, go to the scalar core. Safe in place (in == out).
template <class T>
[[gnu::always_inline]] inline void identity_block(const KernelParams& kp, const T* in, T* out, std::size_t n,
                                                  std::uint64_t index0) {
  using U = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
  constexpr U exponent = sizeof(T) == 8 ? U(0x7FF0000000000000ull) : U(0x7F800000u);
  const U flush = kp.ftz || kp.rounding.flush_subnormal_inputs ? 1 : 0;
  auto special = [&](U b) {
    const U e = b & exponent;
    return U(e == exponent ? 1 : 0) | (flush & U(e == 0 ? 1 : 0) & U(U(b << 1) != 0 ? 1 : 0));
  };
  // In place (the trainer's binary64 tensors) nothing is stored: the scan
  // alone, so the cache lines stay clean.
  if (static_cast<const void*>(in) != static_cast<const void*>(out))
    for (std::size_t i = 0; i < n; ++i) out[i] = in[i];
  U any = 0;
  for (std::size_t i = 0; i < n; ++i) any |= special(std::bit_cast<U>(in[i]));
  if (!any) return;
  for (std::size_t i = 0; i < n; ++i)
    if (special(std::bit_cast<U>(in[i]))) out[i] = reference_element<T, T>(kp, in[i], index0 + i);
}

// binary64 -> binary32 values by the hardware conversion (cvtpd2ps): IEEE
// 754 convertFormat, i.e. round_pack's round to nearest even with subnormal
// results kept and overflow to infinity, chosen only where the call asks for
// exactly that and MXCSR rounds to nearest without FTZ or DAZ. NaNs go to the
// scalar core (payload and policy).
[[gnu::always_inline]] inline void binary32_block(const KernelParams& kp, const double* __restrict in,
                                                  double* __restrict out, std::size_t n,
                                                  std::uint64_t index0) {
  std::uint64_t any_nan = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = in[i];
    out[i] = double(float(x));
    any_nan |= x != x ? 1 : 0;
  }
  if (!any_nan) return;
  for (std::size_t i = 0; i < n; ++i)
    if (in[i] != in[i]) out[i] = reference_element<double, double>(kp, in[i], index0 + i);
}

}  // namespace rpsim::array_detail
