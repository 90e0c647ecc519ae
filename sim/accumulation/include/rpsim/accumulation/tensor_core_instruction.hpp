// One Tensor Core instruction and a chain of them over K, on operands read
// straight from memory (a row of A, a column of B, any stride), for the CUDA
// backend's kernels and the device-arith tests: the steps of an instruction
// take their products as TensorCoreModel::step_interleave deals them, C joins
// as c_join says, and block scales join each product's exponent
// (tensor_core_paths.cpp's block_scaled, which calls block_scaled_terms).
// The per-step arithmetic is tensor_core_step.hpp's, the CPU's own; the CPU
// builds the same order as a ChainPlan (tensor_core_chain.hpp), and
// tests/sim/cuda checks the two agree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rpsim/accumulation/tensor_core_step.hpp"

namespace rpsim::sim::tc_detail {

// The steps of a kernel schedule's chains as flat arrays (a ChainPlan,
// tensor_core_chain.hpp, copied out): order[t] is the k of the t-th product,
// step s covers [begin[s], begin[s+1]), first[s] / last[s] mark an
// instruction's first and last step.
struct PlanView {
  const int* order = nullptr;
  const int* begin = nullptr;
  const std::uint8_t* first = nullptr;
  const std::uint8_t* last = nullptr;
};

// block_scaled_terms' results that are not a count.
constexpr int kNanScale = -1, kNanC = -2;

RPSIM_HD_ABI_BEGIN

// The products step `st` of an instruction of n products takes (indices
// within the instruction, in order); returns their count (0: the step holds
// only zero padding).
RPSIM_HD_INLINE int step_products(const TcStep& p, int n, int st, int* idx) {
  const int steps = p.instruction_terms / p.terms_per_step;
  // Runs of g products dealt to the steps in turn; contiguous runs are the
  // case g = terms_per_step.
  const int g = p.step_interleave > 0 ? p.step_interleave : p.terms_per_step;
  int count = 0;
  for (int run = st; run * g < n; run += steps)
    for (int i = run * g; i < hd::min_of((run + 1) * g, n); ++i) idx[count++] = i;
  return count;
}

// One instruction over n <= instruction_terms products a[i*as] * b[i*bs]
// with C = c: its steps from C (or from -0, C joining after them).
template <int MaxTerms, class T>
RPSIM_HD_INLINE double instruction(const TcStep& p, const T* a, std::ptrdiff_t as, const T* b,
                                   std::ptrdiff_t bs, int n, double c) {
  const int steps = p.instruction_terms / p.terms_per_step;
  const double held = c;
  // The instruction's steps start from -0 (the identity of IEEE addition)
  // when C is added after them (CJoin::after_products).
  double acc = p.c_after ? -0.0 : c;
  double av[MaxTerms], bv[MaxTerms];
  int ae[MaxTerms], be[MaxTerms], idx[MaxTerms];
  for (int st = 0; st < steps; ++st) {
    const int count = step_products(p, n, st, idx);
    for (int t = 0; t < count; ++t) {
      const Operand oa = decode(p, double(a[idx[t] * as]), false);
      const Operand ob = decode(p, double(b[idx[t] * bs]), true);
      av[t] = oa.value;
      ae[t] = oa.exponent;
      bv[t] = ob.value;
      be[t] = ob.exponent;
    }
    if (count > 0) acc = run_step<true>(p, count, av, ae, bv, be, acc);
  }
  return p.c_after ? add_after(p, acc, held) : acc;
}

// The plain chain over K (tensor_core_dot): instructions of
// instruction_terms products from k = 0 (the last one shorter), the result
// of each C of the next.
template <int MaxTerms, class T>
RPSIM_HD_INLINE double chain(const TcStep& p, const T* a, std::ptrdiff_t as, const T* b, std::ptrdiff_t bs,
                             int k, double c) {
  for (int base = 0; base < k; base += p.instruction_terms)
    c = instruction<MaxTerms>(p, a + base * as, as, b + base * bs, bs,
                              hd::min_of(p.instruction_terms, k - base), c);
  return c;
}

// Steps [s0, s1) of a plan (one chunk: s0 is an instruction's first step) on
// the accumulator acc, operands a[k*as], b[k*bs].
template <int MaxTerms, class T>
RPSIM_HD_INLINE double plan_steps(const TcStep& p, const PlanView& plan, int s0, int s1, const T* a,
                                  std::ptrdiff_t as, const T* b, std::ptrdiff_t bs, double acc) {
  double av[MaxTerms], bv[MaxTerms];
  int ae[MaxTerms], be[MaxTerms];
  double held = 0;
  for (int s = s0; s < s1; ++s) {
    if (p.c_after && plan.first[s]) {
      held = acc;
      acc = -0.0;
    }
    const int base = plan.begin[s], count = plan.begin[s + 1] - base;
    for (int t = 0; t < count; ++t) {
      const int k = plan.order[base + t];
      const Operand oa = decode(p, double(a[k * as]), false);
      const Operand ob = decode(p, double(b[k * bs]), true);
      av[t] = oa.value;
      ae[t] = oa.exponent;
      bv[t] = ob.value;
      be[t] = ob.exponent;
    }
    acc = run_step<true>(p, count, av, ae, bv, be, acc);
    if (p.c_after && plan.last[s]) acc = add_after(p, acc, held);
  }
  return acc;
}

// The significand-free part of MMA-Sim's extract_significand_exponent for a
// scale: its exponent clamped at the scale format's emin, zero_exponent for 0.
RPSIM_HD_INLINE int scale_exponent(const TcStep& p, double x) {
  if (x == 0) return p.zero_exponent;
  const int e = floor_log2(x);
  return e < p.scale_emin ? p.scale_emin : e;
}

// The products' operands of a block-scaled instruction without product
// groups (mxf8f6f4), decoded with their scales: x[k*xs] as A's operand
// (b_side false) or B's, times its block's scale s[(k / scale_block) * ss],
// the scale's exponent joining the operand's (MMA-Sim fused_dot_add with
// scale_a/scale_b). Block by block, so each scale and its exponent are read
// once, not once per product. block_scaled_terms decodes one
// instruction's operands with it; the CPU GEMM decodes each row of A and
// column of B once (gemm_scaled.cpp). A NaN scale decodes to NaNs; callers
// return the default NaN for its blocks before the step sees them.
template <class T, class S>
RPSIM_HD_INLINE void block_scaled_operands(const TcStep& p, const T* x, std::ptrdiff_t xs, int n, const S* s,
                                           std::ptrdiff_t ss, bool b_side, double* v, int* e) {
  const int blk = p.scale_block;
  for (int j = 0; j * blk < n; ++j) {
    const double scale = double(s[j * ss]);
    const int scale_e = floor_log2(scale);  // scale_exponent() above is the product groups' rule
    for (int k = j * blk; k < hd::min_of((j + 1) * blk, n); ++k) {
      const Operand o = decode(p, double(x[k * xs]), b_side);
      v[k] = o.value * scale;
      e[k] = o.exponent + scale_e;
    }
  }
}

// The terms of one block-scaled instruction over n products: each product
// with its blocks' scales (sa[(i / scale_block) * sas], sb[...]) joining its
// exponent (MMA-Sim fused_dot_add with scale_a/scale_b for mxf8f6f4), or,
// with product_group, each group's products summed exactly, times the
// scales' magnitudes, aligned at the scales' exponents alone (MMA-Sim
// nv_fused_dot_add_with_block_scale for mxf4nvf4: e2m1 products on a 2^-2
// grid, |group sum| <= 16 * 36, exact). Returns the number of terms, or
// kNanScale (the result is the default NaN) or kNanC (the result is C, a NaN,
// with product groups).
template <class T, class S>
RPSIM_HD_INLINE int block_scaled_terms(const TcStep& p, const T* a, std::ptrdiff_t as, const T* b,
                                       std::ptrdiff_t bs, int n, double c, const S* sa, std::ptrdiff_t sas,
                                       const S* sb, std::ptrdiff_t sbs, double* av, int* ae, double* bv,
                                       int* be) {
  const int blk = p.scale_block;
  for (int j = 0; j * blk < n; ++j)
    if (hd::is_nan(double(sa[j * sas])) || hd::is_nan(double(sb[j * sbs]))) return kNanScale;
  int terms = 0;
  if (p.product_group > 0) {
    if (hd::is_nan(c)) return kNanC;
    for (int k = 0; k < n; k += p.product_group) {
      double s = 0;
      for (int i = k; i < hd::min_of(k + p.product_group, n); ++i) s += double(a[i * as]) * double(b[i * bs]);
      const double xa = hd::abs_of(double(sa[(k / blk) * sas])), xb = hd::abs_of(double(sb[(k / blk) * sbs]));
      av[terms] = s * xa * xb;
      ae[terms] = scale_exponent(p, xa) + scale_exponent(p, xb);
      bv[terms] = 1.0;
      be[terms] = 0;
      ++terms;
    }
    return terms;
  }
  block_scaled_operands(p, a, as, n, sa, sas, false, av, ae);
  block_scaled_operands(p, b, bs, n, sb, sbs, true, bv, be);
  return n;
}

// One block-scaled instruction (n <= MaxTerms products, C = c).
template <int MaxTerms, class T, class S>
RPSIM_HD_INLINE double block_scaled_instruction(const TcStep& p, const T* a, std::ptrdiff_t as, const T* b,
                                                std::ptrdiff_t bs, int n, double c, const S* sa,
                                                std::ptrdiff_t sas, const S* sb, std::ptrdiff_t sbs) {
  double av[MaxTerms], bv[MaxTerms];
  int ae[MaxTerms], be[MaxTerms];
  const int terms = block_scaled_terms(p, a, as, b, bs, n, c, sa, sas, sb, sbs, av, ae, bv, be);
  if (terms == kNanScale) return hd::quiet_nan();
  if (terms == kNanC) return c;
  return run_step<true>(p, terms, av, ae, bv, be, c);
}

// A block-scaled chain over K (a multiple of scale_block): instructions of
// instruction_terms products with their scales, each result C of the next.
template <int MaxTerms, class T, class S>
RPSIM_HD_INLINE double block_scaled_chain(const TcStep& p, const T* a, std::ptrdiff_t as, const T* b,
                                          std::ptrdiff_t bs, int k, double c, const S* sa, std::ptrdiff_t sas,
                                          const S* sb, std::ptrdiff_t sbs) {
  const int per = p.instruction_terms;
  for (int base = 0; base < k; base += per) {
    const int blocks = base / p.scale_block;
    c = block_scaled_instruction<MaxTerms>(p, a + base * as, as, b + base * bs, bs, hd::min_of(per, k - base),
                                           c, sa + blocks * sas, sas, sb + blocks * sbs, sbs);
  }
  return c;
}

RPSIM_HD_ABI_END

}  // namespace rpsim::sim::tc_detail
