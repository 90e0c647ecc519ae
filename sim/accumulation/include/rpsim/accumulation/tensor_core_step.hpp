// The per-step arithmetic of the Tensor Core block-FMA model (tensor_core.hpp),
// one definition for the CPU and the CUDA backend (RPSIM_HD): operand
// decoding, the alignment to the largest exponent with truncation, the exact
// fixed-point sum, the final normalisation, C added after the products
// (c_join = after_products) and the block scales' exponents. The CPU's chains
// (tensor_core_chain.hpp, the AVX-512 tile kernel) and the CUDA kernels call
// it on a TcStep, a plain struct a kernel takes by value.
//
// Why this is exact with doubles: inputs have at most 11 significant bits
// (fp16, tf32; bf16 8, FP8 4), so a product has at most 22 and is exact in
// binary64. Scaling by 2^(F - Emax) is exact (a power of two, far from
// binary64's range limits: |Emax| < 600), and the truncated aligned term is an
// integer below 2^(F+2), so the fixed-point sum over at most a few hundred
// terms is an exact int64.
#pragma once

#include <cstdint>

#include "rpsim/formats/format_desc.hpp"
#include "rpsim/formats/host_device.hpp"
#include "rpsim/formats/rounding.hpp"
#include "rpsim/formats/scalar_convert.hpp"

namespace rpsim::sim {

// What one step of a TensorCoreModel needs (tc_step_of, tensor_core.hpp).
struct TcStep {
  int align_bits = 25;        // fraction_bits
  int align_floor = -100000;  // alignment_exponent_floor
  bool c_after = false;       // c_join == CJoin::after_products
  int frac_bits = 23;         // result_bits()
  int out_emin = -126, out_emax = 127;
  int in_emin = -14, in_emin_b = -14;  // A's and B's input formats
  double in_min_normal = 0, in_min_normal_b = 0;
  int zero_exponent = -30000;
  bool subnormal_inputs = true;
  RoundingMode mode = RoundingMode::toward_zero;  // final_rounding
  bool ftz = false;                               // !subnormal_outputs
  FormatDesc output;                              // the accumulator/C/D format
  FormatDesc result;  // the final normalisation's: output, or its narrower accumulator (FP8: 13 bits)
  // The instruction's shape (instruction_terms(), step_interleave).
  int terms_per_step = 16, instruction_terms = 16, step_interleave = 0;
  // Block scales: products per scale (0: none), the scale format's emin, and
  // products summed exactly per group before the scales (mxf4nvf4).
  int scale_block = 0, scale_emin = 0, product_group = 0;
};

namespace tc_detail {

// Exponent given to zeros: never the largest, and ea+eb stays far from overflow.
constexpr int kZeroExponent = -30000;
// Exponents below this mean "every term is zero".
constexpr int kAllZeroThreshold = -20000;
// At most this many products in one step or block-scaled instruction.
constexpr int kMaxStepTerms = 1024;

// A decoded input: its value and its alignment exponent, floor(log2|x|)
// clamped at the input format's emin (a subnormal input's significand is
// 0.f, so a product's significand may be below 1: the Generic_BFMA_TC model
// of Khattak & Mikaitis does the same).
struct Operand {
  double value = 0;
  int exponent = kZeroExponent;
};

RPSIM_HD_ABI_BEGIN

// 2^e as a double for -1022 <= e <= 1023.
RPSIM_HD_INLINE double pow2(int e) {
  return hd::double_of(static_cast<std::uint64_t>(e + 1023) << 52);
}

// floor(log2|x|) for finite non-zero x, from the binary64 encoding.
RPSIM_HD_INLINE int floor_log2(double x) {
  const std::uint64_t bits = hd::bits_of(x);
  const int field = static_cast<int>((bits >> 52) & 0x7ff);
  if (field != 0) return field - 1023;
  return -1075 + hd::bit_width64(bits & ((1ull << 52) - 1));  // binary64 subnormal
}

RPSIM_HD_INLINE Operand decode_operand(double x, int input_emin, double input_min_normal,
                                       bool subnormal_inputs, int zero_exponent = kZeroExponent) {
  // Zeros keep their sign and non-finite values their value (the checked
  // steps give the IEEE special results); a zero's alignment exponent is the
  // model's zero_exponent.
  Operand o;
  if (x == 0 || !hd::is_finite(x)) {
    o.value = x;
    if (x == 0) o.exponent = zero_exponent;
    return o;
  }
  if (hd::abs_of(x) < input_min_normal && !subnormal_inputs) {
    o.value = hd::copy_sign(0.0, x);  // DAZ
    o.exponent = zero_exponent;
    return o;
  }
  o.value = x;
  const int e = floor_log2(x);
  o.exponent = e < input_emin ? input_emin : e;
  return o;
}

// A's (b_side false) or B's operand decoded.
RPSIM_HD_INLINE Operand decode(const TcStep& p, double x, bool b_side) {
  return b_side ? decode_operand(x, p.in_emin_b, p.in_min_normal_b, p.subnormal_inputs, p.zero_exponent)
                : decode_operand(x, p.in_emin, p.in_min_normal, p.subnormal_inputs, p.zero_exponent);
}

// The exponent C aligns at: its own, clamped at the emin of C's format
// (c_emin: the output format's, -126 for binary32, -14 for binary16), as a
// subnormal's exponent field reads. MMA-Sim clamps a binary16 C at -14 (its
// extract_significand_exponent); a held-out MMA-Sim twin (another seed,
// harder mix) separates -14 from -126 on 9 of 289,500 cases, all FP8 ->
// binary16 with a subnormal C (Ada mma, Hopper wgmma), and tc-golden and
// tc-stress, binary16 output included, stay at 100% with either.
RPSIM_HD_INLINE int c_exponent(double c, int c_emin) {
  if (c == 0) return kZeroExponent;
  const int e = floor_log2(c);
  return e < c_emin ? c_emin : e;
}

// Rounds the finite non-zero double v to `frac_bits` fraction bits with
// `mode` (nearest_even or toward_zero) on the binary64 encoding, when v and
// the result are normal in `out`; returns false to ask for the exact path.
RPSIM_HD_INLINE bool fast_round(double v, int frac_bits, RoundingMode mode, int out_emin, int out_emax,
                                double& result) {
  std::uint64_t bits = hd::bits_of(v);
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
  result = hd::double_of(bits);
  return true;
}

// Sum of the aligned, truncated terms: products av[i]*bv[i] (exponents
// ae[i]+be[i]) and c (exponent ec), all on the grid 2^(emax - F); emax is
// returned through the reference. Written so that the host's loops
// vectorise: when every aligned term fits in 31 bits (fraction_bits <= 28:
// |term| < 2^(F+2)), the truncation is a packed double->int32 conversion and
// the sum is of integers held exactly in doubles (|sum| < 2^53), so the
// reassociation that `omp simd reduction` allows changes nothing.
RPSIM_HD_INLINE double aligned_sum_arrays(int n, const double* av, const int* ae, const double* bv,
                                          const int* be, double c, int ec, int fraction_bits, int floor,
                                          int& emax) {
  int m = ec;
  RPSIM_OMP_SIMD_MAX(m)
  for (int i = 0; i < n; ++i) m = hd::max_of(m, ae[i] + be[i]);
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
    RPSIM_OMP_SIMD_SUM(s)
    for (int i = 0; i < n; ++i) s += static_cast<double>(static_cast<std::int32_t>(av[i] * bv[i] * scale));
  } else {
    std::int64_t t = static_cast<std::int64_t>(c * scale);
    for (int i = 0; i < n; ++i) t += static_cast<std::int64_t>(av[i] * bv[i] * scale);
    s = static_cast<double>(t);
  }
  return s;
}

// magnitude * 2^exponent (negative: its negation) rounded as the hardware
// does, through the formats core's round_pack.
RPSIM_HD_INLINE double finish_slow(const TcStep& p, bool negative, std::int64_t magnitude, int exponent) {
  // Overflow: the hardware returns the infinity whatever the rounding
  // (Khattak & Mikaitis's model; the exponent field saturates).
  const int top = hd::bit_width64(static_cast<std::uint64_t>(magnitude)) - 1 + exponent;
  if (top > p.out_emax) return hd::infinity(negative);
  Flags flags = 0;
  RoundingDesc r;
  r.mode = p.mode;
  r.flush_subnormal_outputs = p.ftz;
  const std::uint64_t bits =
      hd::round_pack(p.result, negative, exponent, static_cast<hd::u128>(magnitude), false, r, flags);
  const double v = hd::to_double(p.result, bits);
  // A result that rounds (or flushes) to zero is +0, even from a negative sum
  // (measured on H100: see tensor_core.hpp, step 5).
  if (v == 0) return 0.0;
  return v;
}

// sum * 2^exponent (sum != 0) rounded as the hardware does. The fast path
// works on the binary64 encoding for normal results under rne/rtz; every
// other case goes through round_pack.
RPSIM_HD_INLINE double finish(const TcStep& p, std::int64_t sum, int exponent) {
  const double v = static_cast<double>(sum) * pow2(exponent);  // exact: |sum| < 2^53
  double r;
  if (fast_round(v, p.frac_bits, p.mode, p.out_emin, p.out_emax, r)) return r;
  return finish_slow(p, sum < 0, sum < 0 ? -sum : sum, exponent);
}

// C added to an instruction's result x (c_join = after_products): an IEEE
// addition in the output format, rounded to nearest even. x and c are
// values of the output format (binary32 or binary16): their binary64 sum
// rounded once more to the output format is the correctly rounded sum (53 >=
// 2*24 + 2, so the double rounding is innocuous), IEEE signs of zero, NaN and
// overflow included.
RPSIM_HD_INLINE double add_after(const TcStep& p, double x, double c) {
  RoundingDesc nearest;
  nearest.flush_subnormal_outputs = p.ftz;
  Flags flags = 0;
  return hd::to_double(p.output, hd::round_binary64(p.output, x + c, nearest, flags));
}

// IEEE special results of a step: NaN if any NaN, inf*0 or inf - inf; else
// the infinity. Returns false when every operand and c are finite.
RPSIM_HD_INLINE bool non_finite_result(const double* a, const double* b, int n, double c, double& result) {
  bool any = !hd::is_finite(c);
  for (int i = 0; i < n && !any; ++i) any = !hd::is_finite(a[i]) || !hd::is_finite(b[i]);
  if (!any) return false;
  bool pos = false, neg = false, nan = hd::is_nan(c);
  if (hd::is_inf(c)) (c > 0 ? pos : neg) = true;
  for (int i = 0; i < n; ++i) {
    const double prod = a[i] * b[i];
    if (hd::is_nan(prod)) nan = true;
    if (hd::is_inf(prod)) (prod > 0 ? pos : neg) = true;
  }
  result = nan || (pos && neg) ? hd::quiet_nan() : hd::infinity(!pos);
  return true;
}

// A step whose aligned sum is exactly zero gives +0, even when every term is
// -0 (IEEE 754 clause 6.3 would give -0 then). The aligned sum is a
// fixed-point number with no signed zero: MMA-Sim (Xie et al. 2025,
// arithmetic.py fused_sum) returns +0 for C = -0 with zero products on every
// NVIDIA path, on 12 of its files (Volta to Blackwell). tc-golden and
// tc-stress hold no case whose terms are all zero; an H200 does the same
// (2026-11-26, gpu-validate's signed-zero patterns: C = -0 or +0 with +0,
// -0 or exactly cancelling products give +0 on mma.sync and wgmma, fp16,
// bf16, tf32, E4M3, E5M2, fp32 and fp16 out; tests/data/tc-h200). The one
// place this rule lives.
RPSIM_HD_INLINE double zero_sum_result() {
  return 0.0;
}

// One step over n decoded products (av/ae, bv/be) with C = c. Checked: the
// operands may be non-finite (the accumulator is always checked: a chain can
// overflow to infinity on its own).
template <bool Checked>
RPSIM_HD_INLINE double run_step(const TcStep& p, int n, const double* av, const int* ae, const double* bv,
                                const int* be, double c) {
  double special;
  if ((Checked || !hd::is_finite(c)) && non_finite_result(av, bv, n, c, special)) return special;
  int emax = 0;
  const double s =
      aligned_sum_arrays(n, av, ae, bv, be, c, c_exponent(c, p.out_emin), p.align_bits, p.align_floor, emax);
  const auto sum = static_cast<std::int64_t>(s);
  if (sum != 0) return finish(p, sum, emax - p.align_bits);
  return zero_sum_result();
}

RPSIM_HD_ABI_END

}  // namespace tc_detail
}  // namespace rpsim::sim
