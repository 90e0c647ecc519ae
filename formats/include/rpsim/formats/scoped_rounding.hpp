// The current rounding environment of scalar code (the typed values in
// value.hpp read it), set for a block by an RAII guard, like <cfenv>'s
// fesetround / fetestexcept but per thread and with stochastic rounding:
//
//   ScopedRounding up(RoundingMode::up);        // until the end of the block
//   half s = half(2048.0) + half(1.0);          // 2050: rounded up
//   bool overflowed = up.test(flag_overflow);   // flags raised in the block
//
// The environment is thread_local: an OpenMP worker does not see a guard set
// by the thread that started the parallel region; set one inside the region
// (or use the Rounding-taking functions of ops.hpp with a counter per element,
// which do not depend on the thread count at all).
#pragma once

#include <cstdint>

#include "rpsim/formats/random.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim {

inline constexpr Flags all_flags =
    flag_inexact | flag_underflow | flag_overflow | flag_infinite | flag_invalid;

// Everything an operation on a typed value needs besides its operands.
struct RoundingEnvironment {
  Rounding rounding;  // mode, FTZ/DAZ, overflow override, NaN policy, stochastic_bits
  // Stochastic rounding draws counter_random(seed, stream, counter++) for every
  // rounding, so a given sequence of operations in one thread always rounds the
  // same way for the same seed.
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::uint64_t counter = 0;
  Flags flags = 0;  // accumulated since the innermost guard began (or was cleared)
};

namespace detail {
// Constant-initialised, so reading it costs a TLS access and no init guard.
inline constinit thread_local RoundingEnvironment current_rounding_environment{};
}  // namespace detail

inline RoundingEnvironment& rounding_environment() {
  return detail::current_rounding_environment;
}

// The Rounding for the next operation: in stochastic mode this consumes one
// draw of the environment's counter.
inline const Rounding& next_rounding() {
  RoundingEnvironment& env = detail::current_rounding_environment;
  if (env.rounding.mode == RoundingMode::stochastic)
    env.rounding.random_bits = counter_random(env.seed, env.stream, env.counter++);
  return env.rounding;
}

// Where operations accumulate their exception flags.
inline Flags& accumulated_flags() {
  return detail::current_rounding_environment.flags;
}

// fetestexcept / feclearexcept for the current thread.
inline Flags test_flags(Flags mask = all_flags) {
  return accumulated_flags() & mask;
}
inline void clear_flags(Flags mask = all_flags) {
  accumulated_flags() &= Flags(~mask);
}

// Sets the current thread's rounding environment until the end of the scope,
// then restores the enclosing one. Flags raised inside the scope are readable
// from the guard and, like IEEE 754's status flags, also reach the enclosing
// scope on exit (as feupdateenv does).
//
// Stochastic state: a guard that sets a seed starts its own counter at 0; one
// that does not continues the enclosing scope's seed and counter, and hands
// the advanced counter back on exit, so no draw is ever used twice.
class ScopedRounding {
 public:
  // Changes only the mode; FTZ/DAZ, overflow, NaN policy and the stochastic
  // state are those of the enclosing scope.
  explicit ScopedRounding(RoundingMode mode) : saved_(rounding_environment()) {
    RoundingEnvironment& env = rounding_environment();
    env.rounding.mode = mode;
    env.flags = 0;
  }
  // Stochastic rounding (or any mode) with its own seed and stream.
  ScopedRounding(RoundingMode mode, std::uint64_t seed, std::uint64_t stream = 0) : ScopedRounding(mode) {
    set_seed(seed, stream);
  }
  // Replaces the whole Rounding (mode, FTZ/DAZ, overflow, NaN policy, bits).
  explicit ScopedRounding(const Rounding& rounding) : saved_(rounding_environment()) {
    RoundingEnvironment& env = rounding_environment();
    env.rounding = rounding;
    env.flags = 0;
  }

  ScopedRounding(const ScopedRounding&) = delete;
  ScopedRounding& operator=(const ScopedRounding&) = delete;

  ~ScopedRounding() {
    RoundingEnvironment& env = rounding_environment();
    const Flags raised = env.flags;
    const std::uint64_t counter = env.counter;
    env = saved_;
    env.flags |= raised;
    if (!own_seed_) env.counter = counter;
  }

  // Settings for the rest of the scope; each returns the guard for chaining.
  ScopedRounding& set_seed(std::uint64_t seed, std::uint64_t stream = 0) {
    RoundingEnvironment& env = rounding_environment();
    env.seed = seed;
    env.stream = stream;
    env.counter = 0;
    own_seed_ = true;
    return *this;
  }
  ScopedRounding& set_stochastic_bits(int bits) {
    if (bits < 1 || bits > 64)
      throw FormatError("stochastic_bits " + std::to_string(bits) + ": must be 1..64");
    rounding_environment().rounding.stochastic_bits = bits;
    return *this;
  }
  // FTZ: tiny results become zero. DAZ: subnormal operands read as zero.
  ScopedRounding& set_flush_subnormals(bool outputs, bool inputs) {
    rounding_environment().rounding.flush_subnormal_outputs = outputs;
    rounding_environment().rounding.flush_subnormal_inputs = inputs;
    return *this;
  }
  ScopedRounding& set_overflow(Overflow overflow) {
    rounding_environment().rounding.overflow = overflow;
    return *this;
  }
  ScopedRounding& set_nan_policy(NanPolicy policy) {
    rounding_environment().rounding.nan_policy = policy;
    return *this;
  }

  // Flags raised since this guard began (or since clear()); only meaningful
  // while this guard is the innermost one.
  Flags flags() const { return rounding_environment().flags; }
  bool test(Flags mask) const { return (rounding_environment().flags & mask) != 0; }
  void clear(Flags mask = all_flags) { clear_flags(mask); }
  // The stochastic counter: the index of the next draw.
  std::uint64_t draws() const { return rounding_environment().counter; }

 private:
  RoundingEnvironment saved_;
  bool own_seed_ = false;
};

}  // namespace rpsim
