// Which kernel runs a call: the instantiations per format, mode and ISA, the
// per-ISA pickers, and the plan a call or a ValueRounding makes once.
// Internal to formats/.
#pragma once

#include "array_exact.hpp"
#include "array_fixed.hpp"
#include "array_kernel.hpp"

namespace rpsim::array_detail {

// Fixed-format tags that stand for the two exact paths (array_exact.hpp)
// and the fixed-point kernel (array_fixed.hpp).
struct IdentityPath {};
struct Binary32Path {};
struct FixedPointPath {};

// What Isa::run<Fixed, Kind, In, Out> runs: an exact path or the bit kernel.
template <class Fixed, int Kind, class In, class Out>
[[gnu::always_inline]] inline void kernel_block(const KernelParams& kp, const In* in, Out* out, std::size_t n,
                                                std::uint64_t index0) {
  if constexpr (std::is_same_v<Fixed, IdentityPath>) {
    identity_block<In>(kp, in, out, n, index0);
  } else if constexpr (std::is_same_v<Fixed, Binary32Path>) {
    binary32_block(kp, in, out, n, index0);
  } else if constexpr (std::is_same_v<Fixed, FixedPointPath>) {
    fixed_block<Kind, In, Out>(kp, in, out, n, index0);
  } else {
    round_block<Fixed, Kind, In, Out>(kp, in, out, n, index0);
  }
}

// The exact paths' kernels, or nullptr when neither applies.
template <class Isa, class In, class Out>
KernelFn<In, Out> pick_exact(const KernelParams& kp) {
  if constexpr (std::is_same_v<In, Out>) {
    if (kp.identity) return &Isa::template run<IdentityPath, kind_rne, In, Out>;
  }
  if constexpr (std::is_same_v<In, double> && std::is_same_v<Out, double>) {
    if (kp.hardware_binary32) return &Isa::template run<Binary32Path, kind_rne, In, Out>;
  }
  return nullptr;
}

// Picks the instantiation for the format and mode; Isa::run<Fixed, Kind, In,
// Out> is the target-attributed wrapper of round_block.
template <class Isa, class Fixed, class In, class Out>
KernelFn<In, Out> by_mode(int kind) {
  switch (kind) {
    case kind_rne: return &Isa::template run<Fixed, kind_rne, In, Out>;
    case kind_rtz: return &Isa::template run<Fixed, kind_rtz, In, Out>;
    case kind_sr: return &Isa::template run<Fixed, kind_sr, In, Out>;
    default: return &Isa::template run<Fixed, kind_other, In, Out>;
  }
}

// The fixed-point kernel for the mode, or nullptr for a floating-point format.
template <class Isa, class In, class Out>
KernelFn<In, Out> pick_fixed_point(const KernelParams& kp) {
  return kp.fixed_point ? by_mode<Isa, FixedPointPath, In, Out>(mode_kind(kp.mode)) : nullptr;
}

template <class Fixed>
bool matches(const KernelParams& kp) {
  return kp.man_bits == Fixed::man_bits && kp.emin == Fixed::emin && kp.bits == Fixed::bits &&
         kp.max_code == Fixed::max_code;
}

template <class Isa, class In, class Out>
KernelFn<In, Out> pick_specialised(const KernelParams& kp) {
  if (auto exact = pick_exact<Isa, In, Out>(kp)) return exact;
  if (auto fixed = pick_fixed_point<Isa, In, Out>(kp)) return fixed;
  const int kind = mode_kind(kp.mode);
  if (matches<Binary16Format>(kp)) return by_mode<Isa, Binary16Format, In, Out>(kind);
  if (matches<Bfloat16Format>(kp)) return by_mode<Isa, Bfloat16Format, In, Out>(kind);
  return by_mode<Isa, RuntimeFormat, In, Out>(kind);
}

// Defined in the ISA translation units for the (In, Out) pairs that
// array_round.cpp uses; nullptr when not built for this target.
template <class In, class Out>
KernelFn<In, Out> pick_portable(const KernelParams& kp);
template <class In, class Out>
KernelFn<In, Out> pick_avx2(const KernelParams& kp);
template <class In, class Out>
KernelFn<In, Out> pick_avx512(const KernelParams& kp);

// binary32 -> binary16 / bfloat16 by the conversion instructions where they
// round exactly as the scalar core (array_round_avx512.cpp); nullptr otherwise.
KernelFn<float, std::uint16_t> pick_hardware_avx512(const KernelParams& kp);

// Formats inside binary32's range in 32-bit lanes after a round to odd into
// binary32, every mode but SR (array_narrow_avx512.cpp); nullptr where it
// does not apply.
template <class In, class Out>
KernelFn<In, Out> pick_narrow_avx512(const KernelParams& kp);

// binary16 and bfloat16 on AVX2 + F16C the same way, in 8 lanes
// (array_narrow_avx2.cpp); nullptr where it does not apply.
template <class In, class Out>
KernelFn<In, Out> pick_narrow_avx2(const KernelParams& kp);

// Stochastic rounding with intrinsics (array_sr_avx512.cpp); nullptr where
// it does not apply.
template <class In, class Out>
KernelFn<In, Out> pick_sr_avx512(const KernelParams& kp);

// Elements per kernel call: small enough that an in-place call's copy of the
// input stays in L1, large enough that the call costs nothing.
constexpr std::size_t block_elements = 2048;

// A call's checks done, parameters computed and kernel chosen (nullptr: the
// scalar core element by element): what round_to_bits and round_values make
// per call and a ValueRounding once (array_round.cpp).
template <class In, class Out>
struct Plan {
  KernelParams kp;
  KernelFn<In, Out> kernel = nullptr;
  int threads = 0;  // 0: OpenMP's default
  std::size_t parallel_threshold = 0;
};
template <class In, class Out>
Plan<In, Out> make_plan(const Format& fmt, const ArrayOptions& options);
template <class In, class Out>
void run_plan(const Plan<In, Out>& plan, const In* in, Out* out, std::size_t n, std::uint64_t first_index);

#define RPSIM_ARRAY_FOR_EACH_PAIR(X) \
  X(double, std::uint8_t)            \
  X(double, std::uint16_t)           \
  X(double, std::uint32_t)           \
  X(double, std::uint64_t)           \
  X(double, double)                  \
  X(float, std::uint8_t)             \
  X(float, std::uint16_t) X(float, std::uint32_t) X(float, std::uint64_t) X(float, float)

}  // namespace rpsim::array_detail
