// Counter-based random bits for stochastic rounding: the draw for element i
// depends only on (seed, stream, i), never on thread count, call order or
// device (the CUDA backend draws the same bits: RPSIM_HD, host_device.hpp).
#pragma once

#include <cstdint>

#include "rpsim/formats/host_device.hpp"

namespace rpsim {
namespace hd {
RPSIM_HD_ABI_BEGIN

// SplitMix64's finaliser (Steele, Lea & Flood 2014): a bijection on 64 bits
// with full avalanche, so consecutive counters give independent-looking bits.
RPSIM_HD constexpr std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Two rounds keyed by seed and stream: the bits for (seed, stream, index).
RPSIM_HD constexpr std::uint64_t counter_random(std::uint64_t seed, std::uint64_t stream,
                                                std::uint64_t index) {
  return mix64(mix64(seed ^ mix64(stream)) ^ index);
}

RPSIM_HD_ABI_END
}  // namespace hd

using hd::counter_random;
using hd::mix64;

}  // namespace rpsim
