// The integer super-accumulator (Kulisch): fixed point wide enough for any
// sum of binary64 products, rounded once by round_pack.
#include "rpsim/accumulation/exact_accumulator.hpp"

#include <bit>
#include <cmath>
#include <stdexcept>

#include "rpsim/formats/unpacked.hpp"

namespace rpsim::sim {

void ExactAccumulator::clear() {
  *this = ExactAccumulator();
}

void ExactAccumulator::add_magnitude(bool negative, std::uint64_t hi, std::uint64_t lo, int exponent) {
  Limbs& acc = negative ? negative_ : positive_;
  const int pos = exponent - kLowestExponent;
  if (pos < 0) throw std::logic_error("ExactAccumulator: term below the fixed-point range");
  std::size_t limb = static_cast<std::size_t>(pos / 64);
  const int shift = pos % 64;
  // The 128-bit value shifted into (up to) three limbs.
  std::uint64_t parts[3];
  parts[0] = lo << shift;
  parts[1] = shift == 0 ? hi : (hi << shift) | (lo >> (64 - shift));
  parts[2] = shift == 0 ? 0 : hi >> (64 - shift);
  std::uint64_t carry = 0;
  for (int i = 0; i < 3 && limb < kLimbs; ++i, ++limb) {
    const std::uint64_t before = acc[limb];
    const std::uint64_t sum1 = before + parts[i];
    const std::uint64_t c1 = sum1 < before;
    const std::uint64_t sum2 = sum1 + carry;
    const std::uint64_t c2 = sum2 < sum1;
    acc[limb] = sum2;
    carry = c1 + c2;
  }
  while (carry && limb < kLimbs) {
    acc[limb] += 1;
    carry = acc[limb] == 0;
    ++limb;
  }
  if (carry) throw std::overflow_error("ExactAccumulator: fixed-point range exceeded");
}

void ExactAccumulator::add(double x) {
  if (std::isnan(x)) {
    has_nan_ = true;
    return;
  }
  if (std::isinf(x)) {
    (x > 0 ? has_pos_inf_ : has_neg_inf_) = true;
    return;
  }
  any_term_ = true;
  if (x == 0) {
    all_terms_negative_zero_ = all_terms_negative_zero_ && std::signbit(x);
    return;
  }
  all_terms_negative_zero_ = false;
  std::uint64_t m;
  int e;
  split_binary64(x, m, e);
  add_magnitude(x < 0, 0, m, e);
}

void ExactAccumulator::add_product(double x, double y) {
  const double p = x * y;
  if (std::isnan(p) || std::isinf(x) || std::isinf(y) || std::isnan(x) || std::isnan(y)) {
    if (std::isnan(p)) {
      has_nan_ = true;
    } else {
      (p > 0 ? has_pos_inf_ : has_neg_inf_) = true;
    }
    return;
  }
  any_term_ = true;
  if (x == 0 || y == 0) {
    all_terms_negative_zero_ = all_terms_negative_zero_ && std::signbit(x) != std::signbit(y);
    return;
  }
  all_terms_negative_zero_ = false;
  std::uint64_t mx, my;
  int ex, ey;
  split_binary64(x, mx, ex);
  split_binary64(y, my, ey);
  const u128 prod = static_cast<u128>(mx) * my;
  add_magnitude(std::signbit(x) != std::signbit(y), static_cast<std::uint64_t>(prod >> 64),
                static_cast<std::uint64_t>(prod), ex + ey);
}

bool ExactAccumulator::is_zero() const {
  if (has_nan_ || has_pos_inf_ || has_neg_inf_) return false;
  return positive_ == negative_;
}

std::uint64_t ExactAccumulator::round(const Format& fmt, const Rounding& rnd, Flags& flags) const {
  if (has_nan_ || (has_pos_inf_ && has_neg_inf_)) {
    if (has_pos_inf_ && has_neg_inf_) flags |= flag_invalid;
    return round_double(fmt, std::numeric_limits<double>::quiet_NaN(), rnd, flags);
  }
  if (has_pos_inf_ || has_neg_inf_) return round_double(fmt, has_pos_inf_ ? HUGE_VAL : -HUGE_VAL, rnd, flags);
  // Sign and magnitude of positive - negative.
  int top = kLimbs - 1;
  while (top >= 0 && positive_[top] == negative_[top]) --top;
  if (top < 0) {
    const bool negative_zero = (any_term_ && all_terms_negative_zero_) || rnd.mode == RoundingMode::down;
    return fmt.zero_bits(negative_zero);
  }
  const bool negative = negative_[top] > positive_[top];
  const Limbs& big = negative ? negative_ : positive_;
  const Limbs& small = negative ? positive_ : negative_;
  Limbs mag{};
  std::uint64_t borrow = 0;
  for (int i = 0; i <= top; ++i) {
    const std::uint64_t d1 = big[i] - small[i];
    const std::uint64_t b1 = big[i] < small[i];
    const std::uint64_t d2 = d1 - borrow;
    const std::uint64_t b2 = d1 < borrow;
    mag[i] = d2;
    borrow = b1 + b2;
  }
  int hi = top;
  while (hi > 0 && mag[hi] == 0) --hi;
  // The top 128 bits as the significand, everything below as sticky.
  const int lead = 63 - std::countl_zero(mag[hi]);  // bit index within limb hi
  const int top_bit = hi * 64 + lead;               // absolute bit index
  const int low_bit = top_bit - 127;                // lowest bit kept
  u128 sig = 0;
  bool sticky = false;
  {
    // Gather 128 bits starting at low_bit (may be negative: pad with zeros).
    auto bits_at = [&](int start) -> std::uint64_t {  // 64 bits from absolute index `start`
      if (start <= -64) return 0;
      if (start < 0) return mag[0] << (-start);
      const int limb = start / 64, shift = start % 64;
      std::uint64_t r = mag[limb] >> shift;
      if (shift != 0 && limb + 1 < kLimbs) r |= mag[limb + 1] << (64 - shift);
      return r;
    };
    const std::uint64_t lo = bits_at(low_bit);
    const std::uint64_t hi64 = bits_at(low_bit + 64);
    sig = (static_cast<u128>(hi64) << 64) | lo;
    if (low_bit > 0) {
      const int full = low_bit / 64;
      for (int i = 0; i < full && !sticky; ++i) sticky = mag[i] != 0;
      const int rem = low_bit % 64;
      if (!sticky && rem) sticky = (mag[full] & ((1ull << rem) - 1)) != 0;
    }
  }
  return round_pack(fmt, negative, static_cast<std::int64_t>(low_bit) + kLowestExponent, sig, sticky, rnd,
                    flags);
}

double ExactAccumulator::value(RoundingMode mode) const {
  Rounding r;
  r.mode = mode;
  Flags f = 0;
  return std::bit_cast<double>(round(formats::binary64(), r, f));
}

double exact_dot(std::span<const double> a, std::span<const double> b, double c) {
  if (a.size() != b.size()) throw std::invalid_argument("exact_dot: a and b differ in length");
  ExactAccumulator acc;
  for (std::size_t i = 0; i < a.size(); ++i) acc.add_product(a[i], b[i]);
  acc.add(c);
  return acc.value();
}

}  // namespace rpsim::sim
