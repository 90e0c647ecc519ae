// The inner loop of the Tensor Core model on pre-decoded operands
// (tensor_core_chain.hpp runs it for every caller). Internal to sim/.
//
// Why this is exact with doubles: inputs have at most 11 significant bits
// (fp16, tf32; bf16 8, FP8 4), so a product has at most 22 and is exact in
// binary64. Scaling by 2^(F - Emax) is exact (a power of two, far from
// binary64's range limits: |Emax| < 600), and the truncated aligned term is an
// integer below 2^(F+2), so the fixed-point sum over at most a few hundred
// terms is an exact int64.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim::tc_detail {

// Exponent given to zeros: never the largest, and ea+eb stays far from overflow.
constexpr int kZeroExponent = -30000;
// Exponents below this mean "every term is zero".
constexpr int kAllZeroThreshold = -20000;

// 2^e as a double for -1022 <= e <= 1023.
inline double pow2(int e) {
  return std::bit_cast<double>(static_cast<std::uint64_t>(e + 1023) << 52);
}

// floor(log2|x|) for finite non-zero x, from the binary64 encoding.
inline int floor_log2(double x) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const int field = static_cast<int>((bits >> 52) & 0x7ff);
  if (field != 0) return field - 1023;
  return -1075 + (64 - std::countl_zero(bits & ((1ull << 52) - 1)));  // binary64 subnormal
}

// A decoded input: its value and its alignment exponent, floor(log2|x|)
// clamped at the input format's emin (a subnormal input's significand is
// 0.f, so a product's significand may be below 1: the Generic_BFMA_TC model
// of Khattak & Mikaitis does the same).
struct Operand {
  double value = 0;
  int exponent = kZeroExponent;
};

inline Operand decode_operand(double x, int input_emin, double input_min_normal, bool subnormal_inputs,
                              int zero_exponent = kZeroExponent) {
  // Zeros keep their sign and non-finite values their value (the checked
  // steps give the IEEE special results); a zero's alignment exponent is the
  // model's zero_exponent.
  Operand o;
  if (x == 0 || !std::isfinite(x)) {
    o.value = x;
    if (x == 0) o.exponent = zero_exponent;
    return o;
  }
  if (std::fabs(x) < input_min_normal && !subnormal_inputs) {
    o.value = std::copysign(0.0, x);  // DAZ
    o.exponent = zero_exponent;
    return o;
  }
  o.value = x;
  const int e = floor_log2(x);
  o.exponent = e < input_emin ? input_emin : e;
  return o;
}

// The exponent C aligns at: its own, clamped at the emin of C's format
// (c_emin: the output format's, -126 for binary32, -14 for binary16), as a
// subnormal's exponent field reads. MMA-Sim clamps a binary16 C at -14 (its
// extract_significand_exponent); a held-out MMA-Sim twin (another seed,
// harder mix) separates -14 from -126 on 9 of 289,500 cases, all FP8 ->
// binary16 with a subnormal C (Ada mma, Hopper wgmma), and tc-golden and
// tc-stress, binary16 output included, stay at 100% with either.
inline int c_exponent(double c, int c_emin) {
  if (c == 0) return kZeroExponent;
  const int e = floor_log2(c);
  return e < c_emin ? c_emin : e;
}

// Rounds the finite non-zero double v to `frac_bits` fraction bits with
// `mode` (nearest_even or toward_zero) on the binary64 encoding, when v and
// the result are normal in `out`; returns false to ask for the exact path.
inline bool fast_round(double v, int frac_bits, RoundingMode mode, int out_emin, int out_emax,
                       double& result) {
  std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
  const int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  if (e < out_emin || e > out_emax) return false;
  const int drop = 52 - frac_bits;
  const std::uint64_t mask = (1ull << drop) - 1;
  const std::uint64_t low = bits & mask;
  bits -= low;
  if (mode == RoundingMode::nearest_even) {
    const std::uint64_t half = 1ull << (drop - 1);
    if (low > half || (low == half && ((bits >> drop) & 1))) bits += 1ull << drop;
  } else if (mode != RoundingMode::toward_zero) {
    return false;
  }
  const int e2 = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  if (e2 > out_emax) return false;
  result = std::bit_cast<double>(bits);
  return true;
}

// Sum of the aligned, truncated terms: products av[i]*bv[i] (exponents
// ae[i]+be[i]) and c (exponent ec), all on the grid 2^(emax - F); emax is
// returned through the reference. Written so that the loops vectorise: when every aligned term fits in 31
// bits (fraction_bits <= 28: |term| < 2^(F+2)), the truncation is a packed double->int32 conversion and the
// sum is of integers held exactly in doubles (|sum| < 2^53), so the reassociation that `omp simd reduction`
// allows changes nothing.
inline double aligned_sum_arrays(int n, const double* av, const int* ae, const double* bv, const int* be,
                                 double c, int ec, int fraction_bits, int floor, int& emax) {
  int m = ec;
#pragma omp simd reduction(max : m)
  for (int i = 0; i < n; ++i) m = std::max(m, ae[i] + be[i]);
  if (m < kAllZeroThreshold) {
    emax = m;
    return 0;
  }
  m = m < floor ? floor : m;
  emax = m;
  const double scale = pow2(fraction_bits - m);
  double s = 0;
  if (fraction_bits <= 28) {
    s = static_cast<double>(static_cast<std::int32_t>(c * scale));
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; ++i) s += static_cast<double>(static_cast<std::int32_t>(av[i] * bv[i] * scale));
  } else {
    std::int64_t t = static_cast<std::int64_t>(c * scale);
    for (int i = 0; i < n; ++i) t += static_cast<std::int64_t>(av[i] * bv[i] * scale);
    s = static_cast<double>(t);
  }
  return s;
}

}  // namespace rpsim::sim::tc_detail
