// An exact-integer oracle for the signed Q formats, independent of the
// formats core: a value of q<w>.<f> is an integer K times 2^-f, every
// operation's exact result is a rational N / D times 2^-f, and its rounding to
// an integer, saturation and flags are written out here from the definitions
// (round.cpp's fixed-point rules: saturation in every mode, one zero,
// underflow exactly when a non-zero value rounds to 0; stochastic rounding
// compares k random bits with the discarded fraction of the magnitude,
// truncated to k bits, as rounding.hpp states).
#pragma once

#include <cstdint>

#include "rpsim/formats/rounding.hpp"

namespace rpsim::fixed_oracle {

using i128 = __int128;
using u128 = unsigned __int128;

struct Q {
  int word = 16, frac = 14;
  std::int64_t min() const { return -(std::int64_t(1) << (word - 1)); }
  std::int64_t max() const { return (std::int64_t(1) << (word - 1)) - 1; }
  std::uint64_t mask() const { return word == 64 ? ~0ull : (1ull << word) - 1; }
  std::int64_t decode(std::uint64_t bits) const {
    bits &= mask();
    return bits >> (word - 1) ? std::int64_t(bits) - (std::int64_t(1) << word) : std::int64_t(bits);
  }
  std::uint64_t encode(std::int64_t k) const { return std::uint64_t(k) & mask(); }
};

struct Result {
  std::uint64_t bits = 0;
  Flags flags = 0;
};

inline u128 abs128(i128 x) {
  return x < 0 ? u128(-x) : u128(x);
}

// floor(sqrt(n)), exactly.
inline u128 isqrt(u128 n) {
  u128 r = 0;
  for (int b = 63; b >= 0; --b) {
    const u128 t = r | (u128(1) << b);
    if (t * t <= n) r = t;
  }
  return r;
}

// The magnitude m = floor(|N| / D) and whether to step it away from zero.
// D > 0; `frac_k` is the discarded fraction truncated to k bits (stochastic).
inline bool away(RoundingMode mode, bool negative, u128 m, u128 rem, u128 d, u128 frac_k, int k,
                 std::uint64_t random) {
  if (rem == 0) return false;
  switch (mode) {
    case RoundingMode::nearest_even: return 2 * rem > d || (2 * rem == d && (m & 1));
    case RoundingMode::nearest_away: return 2 * rem >= d;
    case RoundingMode::toward_zero: return false;
    case RoundingMode::down: return negative;
    case RoundingMode::up: return !negative;
    case RoundingMode::odd: return (m & 1) == 0;
    case RoundingMode::stochastic: {
      const u128 r = random & (k >= 64 ? ~0ull : (1ull << k) - 1);
      return frac_k + r >= (u128(1) << k);
    }
  }
  return false;
}

// Rounds the magnitude m (+ a non-zero remainder if inexact) with the sign,
// then saturates.
inline Result finish(const Q& q, bool negative, u128 m, bool inexact, bool step) {
  Result out;
  if (inexact) out.flags |= flag_inexact;
  if (step) m += 1;
  const u128 limit = negative ? u128(-q.min()) : u128(q.max());
  if (m > limit) {
    out.flags |= flag_overflow | flag_inexact;
    out.bits = q.encode(negative ? q.min() : q.max());
    return out;
  }
  if (m == 0 && inexact) out.flags |= flag_underflow;
  out.bits = q.encode(negative ? -std::int64_t(m) : std::int64_t(m));
  return out;
}

// K = N / D rounded (D != 0).
inline Result round_ratio(const Q& q, i128 n, i128 d, const Rounding& r) {
  if (d < 0) n = -n, d = -d;
  const bool negative = n < 0;
  const u128 an = abs128(n), ud = u128(d);
  const u128 m = an / ud, rem = an % ud;
  const int k = r.stochastic_bits;
  const u128 frac_k = (rem << k) / ud;  // callers keep |N| and D below 2^90
  return finish(q, negative, m, rem != 0, away(r.mode, negative, m, rem, ud, frac_k, k, r.random_bits));
}

// K = sqrt(N) for N >= 0: never a tie (4N is even, (2s + 1)^2 odd).
inline Result round_sqrt(const Q& q, u128 n, const Rounding& r) {
  const u128 s = isqrt(n);
  const bool inexact = s * s != n;
  const int k = r.stochastic_bits;
  const u128 frac_k = isqrt(n << (2 * k)) - (s << k);  // floor(frac * 2^k)
  bool step = false;
  if (inexact) {
    if (r.mode == RoundingMode::nearest_even || r.mode == RoundingMode::nearest_away)
      step = 4 * n > (2 * s + 1) * (2 * s + 1);
    else
      step = away(r.mode, false, s, 1, 2, frac_k, k, r.random_bits);  // rem/d: any non-tie fraction
  }
  return finish(q, false, s, inexact, step);
}

}  // namespace rpsim::fixed_oracle
