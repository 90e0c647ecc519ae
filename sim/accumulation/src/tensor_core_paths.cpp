// The datapaths of TensorCoreModel other than NVIDIA's plain block FMA
// (tensor_core.hpp, Datapath) and the block-scaled dot. Each follows the
// arithmetic of MMA-Sim (Xie et al., arXiv 2511.10909; microsoft/MMA-Sim,
// simulator/arithmetic.py, amd.py, nv_ptx.py), re-derived here on exact
// integers; the cited function names are MMA-Sim's.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/accumulation/tensor_core_instruction.hpp"
#include "rpsim/formats/rounding.hpp"
#include "tensor_core_chain.hpp"

namespace rpsim::sim {

namespace {

using tc_detail::floor_log2;
using tc_detail::pow2;

constexpr double kInf = std::numeric_limits<double>::infinity();

double round_to(const Format& f, double v, RoundingMode mode) {
  return to_double(f, round_double(f, v, mode));
}

// fma_chain: acc = fma(a_k, b_k, acc) in the output format. Both operands are
// values of the output format here (binary32 or binary64), so a binary32
// fmaf is exact to compute through std::fmaf, and binary64 through std::fma.
double fma_chain(const TensorCoreModel& m, std::span<const double> a, std::span<const double> b, double c) {
  const bool single = m.output.bits == 32;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (single)
      c = static_cast<double>(
          std::fmaf(static_cast<float>(a[k]), static_cast<float>(b[k]), static_cast<float>(c)));
    else
      c = std::fma(a[k], b[k], c);
  }
  return c;
}

// A binary32 value flushed to a zero of its sign when subnormal (CDNA2).
float flush(float x, bool on) {
  return on && std::fabs(x) < 0x1p-126f ? x * 0.0f : x;
}

// pairwise_fma: one group's binary tree (MMA-Sim pairwise_dot).
float pairwise(const float* a, const float* b, std::size_t n, bool ftz) {
  float s;
  if (n == 1) {
    s = std::fmaf(a[0], b[0], 0.0f);
  } else {
    const std::size_t h = n / 2;
    s = std::fmaf(pairwise(a, b, h, ftz), 1.0f, pairwise(a + h, b + h, n - h, ftz));
  }
  return flush(s, ftz);
}

double pairwise_fma(const TensorCoreModel& m, std::span<const double> a, std::span<const double> b,
                    double c) {
  const bool ftz = !m.subnormal_outputs;
  // CDNA2 flushes subnormal inputs and C to +0 first (MMA-Sim flush_denormal
  // without keep_sign); binary16 and bfloat16 values are exact in binary32.
  auto in = [&](double x, const Format& f) {
    return static_cast<float>(!m.subnormal_inputs && std::fabs(x) < f.min_normal() ? 0.0 : x);
  };
  std::vector<float> af(a.size()), bf(b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    af[k] = in(a[k], m.input);
    bf[k] = in(b[k], m.b_input());
  }
  float acc = static_cast<float>(!m.subnormal_inputs && std::fabs(c) < 0x1p-126 ? 0.0 : c);
  const auto g = static_cast<std::size_t>(m.terms_per_step);
  for (std::size_t k = 0; k < a.size(); k += g) {
    const std::size_t n = std::min(g, a.size() - k);
    acc = flush(acc + pairwise(af.data() + k, bf.data() + k, n, ftz), ftz);
  }
  return acc;
}

// A value's significand and exponent as MMA-Sim's extract_significand_exponent
// gives them: |significand| in [1, 2), the exponent clamped at emin (a
// subnormal's significand below 1), and a zero at exponent zero_exponent.
struct Split {
  double significand;
  int exponent;
};
Split split(double x, int emin, int zero_exponent) {
  if (x == 0) return {0.0, zero_exponent};
  const int e = std::max(floor_log2(x), emin);
  return {x * pow2(-e), e};
}

// MMA-Sim fused_sum on a binary64 grid: each significand truncated (toward
// zero) to `bits` fraction bits below 2^emax, summed exactly.
struct Fused {
  double sum;  // an integer multiple of 2^-bits, exact
  int exponent;
};
Fused fused_sum(const std::vector<Split>& t, int bits) {
  int e = std::numeric_limits<int>::min();
  for (const Split& s : t) e = std::max(e, s.exponent);
  double sum = 0;
  for (const Split& s : t) sum += std::trunc(s.significand * pow2(bits + s.exponent - e)) * pow2(-bits);
  return {sum, e};
}

// fused_round_down over one group (MMA-Sim amd_fused_dot_rd_add), C a binary32 value.
double fused_round_down_group(const TensorCoreModel& m, const double* a, const double* b, std::size_t n,
                              double c) {
  double exact = c;
  bool pos = false, neg = false;
  for (std::size_t i = 0; i < n; ++i) exact += a[i] * b[i];
  if (!std::isfinite(exact)) return exact;  // NaN, or the infinity of the inputs
  std::vector<Split> terms;
  for (std::size_t i = 0; i < n; ++i) {
    const double p = a[i] * b[i];
    // Products beyond binary32's range are infinities (MMA-Sim: |p| >= 2^128).
    if (p >= 0x1p128) pos = true;
    if (p <= -0x1p128) neg = true;
    const Split sa = split(a[i], m.input.emin, m.zero_exponent);
    const Split sb = split(b[i], m.b_input().emin, m.zero_exponent);
    terms.push_back({sa.significand * sb.significand, sa.exponent + sb.exponent});
  }
  if (pos || neg) return pos && neg ? std::numeric_limits<double>::quiet_NaN() : (pos ? kInf : -kInf);
  const int f = m.fraction_bits;
  Split sc = split(c, -126, m.zero_exponent);
  Fused s{0, 0};
  if (m.two_stage) {
    std::vector<Split> even, odd;
    for (std::size_t i = 0; i < terms.size(); ++i) (i % 2 ? odd : even).push_back(terms[i]);
    const Fused s0 = fused_sum(even, f), s1 = fused_sum(odd, f);
    const int e = std::max(s0.exponent, s1.exponent);
    s.sum = std::floor(s0.sum * pow2(f + s0.exponent - e)) * pow2(-f) +
            std::floor(s1.sum * pow2(f + s1.exponent - e)) * pow2(-f);
    s.exponent = e;
  } else {
    s = fused_sum(terms, f);
  }
  const int e = std::max(s.exponent, sc.exponent);
  const double sum = std::floor(s.sum * pow2(31 + s.exponent - e)) * pow2(-31);
  // Two-stage FP8 drops a C more than 25 binades below the sum.
  const double cv = m.two_stage && sc.exponent < e - 25
                        ? 0.0
                        : std::floor(sc.significand * pow2(24 + sc.exponent - e)) * pow2(-24);
  return round_to(m.output, (sum + cv) * pow2(e), RoundingMode::nearest_even);
}

double fused_round_down(const TensorCoreModel& m, std::span<const double> a, std::span<const double> b,
                        double c) {
  const auto g = static_cast<std::size_t>(m.terms_per_step);
  for (std::size_t k = 0; k < a.size(); k += g)
    c = fused_round_down_group(m, a.data() + k, b.data() + k, std::min(g, a.size() - k), c);
  return c;
}

// Block-scaled NVIDIA dot: the block FMA step over terms whose exponents
// carry the scales' (MMA-Sim fused_dot_add with scale_a/scale_b for
// mxf8f6f4; nv_fused_dot_add_with_block_scale for mxf4nvf4, product_group
// 16: each group's products summed exactly, times the scales' significands,
// aligned at the scales' exponents alone).
double block_scaled(const TensorCoreModel& m, std::span<const double> a, std::span<const double> b, double c,
                    std::span<const double> sa, std::span<const double> sb) {
  const auto blk = static_cast<std::size_t>(m.scale_block);
  if (sa.size() * blk != a.size() || sb.size() * blk != b.size())
    throw std::invalid_argument(
        fmt::format("tensor core model '{}': {} products need {} scales each, got {} and {}", m.name,
                    a.size(), a.size() / blk, sa.size(), sb.size()));
  // One instruction's terms (at most 64 products): the stack, not the heap,
  // since a GEMM calls this once per instruction and element.
  constexpr std::size_t kMax = tc_detail::kMaxStepTerms;
  if (a.size() > kMax)
    throw std::invalid_argument(fmt::format(
        "tensor core model '{}': {} products in one block-scaled step, at most {}", m.name, a.size(), kMax));
  const tc_detail::Finisher fin(m);
  return tc_detail::block_scaled_instruction<kMax>(fin, a.data(), 1, b.data(), 1, static_cast<int>(a.size()),
                                                   c, sa.data(), 1, sb.data(), 1);
}

// Longer K (a GEMM's): a chain of instructions of instruction_terms()
// products each with their scales, the result of one C of the next (as the
// block FMA chain feeds it, tensor_core.hpp); a last, shorter instruction
// takes the blocks left (K a multiple of scale_block). One instruction's K
// (tc-validate's vectors) is the single call.
double block_scaled_chain(const TensorCoreModel& m, std::span<const double> a, std::span<const double> b,
                          double c, std::span<const double> sa, std::span<const double> sb) {
  const auto blk = static_cast<std::size_t>(m.scale_block);
  const auto per = static_cast<std::size_t>(m.instruction_terms());
  if (a.size() % blk != 0)
    throw std::invalid_argument(fmt::format(
        "tensor core model '{}': K = {} is not a multiple of the block {}", m.name, a.size(), blk));
  if (a.size() <= per) return block_scaled(m, a, b, c, sa, sb);
  if (sa.size() * blk != a.size() || sb.size() * blk != b.size())
    return block_scaled(m, a, b, c, sa, sb);  // the shape error, named there
  for (std::size_t k = 0; k < a.size(); k += per) {
    const std::size_t n = std::min(per, a.size() - k);
    c = block_scaled(m, a.subspan(k, n), b.subspan(k, n), c, sa.subspan(k / blk, n / blk),
                     sb.subspan(k / blk, n / blk));
  }
  return c;
}

}  // namespace

double tensor_core_dot_other(const TensorCoreModel& m, std::span<const double> a, std::span<const double> b,
                             double c, std::span<const double> scale_a, std::span<const double> scale_b) {
  if (a.size() != b.size())
    throw std::invalid_argument(
        fmt::format("tensor core dot: a has {} elements, b has {}", a.size(), b.size()));
  if (m.scale_block > 0) return block_scaled_chain(m, a, b, c, scale_a, scale_b);
  switch (m.datapath) {
    case Datapath::fma_chain: return fma_chain(m, a, b, c);
    case Datapath::pairwise_fma: return pairwise_fma(m, a, b, c);
    case Datapath::fused_round_down: return fused_round_down(m, a, b, c);
    case Datapath::block_fma: break;
  }
  return tensor_core_dot(m, a, b, c);
}

}  // namespace rpsim::sim
