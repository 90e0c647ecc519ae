// The one chain of block-FMA steps: every Tensor Core result (a single step,
// a dot product, a GEMM under a tc: model or a kernel schedule) goes through
// run_step and run_chain on operands decoded in the order the steps take
// them. Internal to sim/accumulation.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/accumulation/tensor_core.hpp"
#include "tensor_core_finish.hpp"
#include "tensor_core_kernel.hpp"

namespace rpsim::sim::tc_detail {

// The products of K in the order the steps take them, chunk after chunk
// (kernel_schedule.hpp): order[t] is the k index of the t-th product; step s
// covers positions [begin[s], begin[s+1]); first[s] / last[s] mark the first
// and last step of an instruction; chunk c covers steps [chunk_step[c],
// chunk_step[c+1]) and belongs to split-K slice chunk_slice[c]. Steps of zero
// padding only are left out.
struct ChainPlan {
  std::vector<int> order;
  std::vector<int> begin;
  std::vector<bool> first, last;
  std::vector<int> chunk_step;
  std::vector<int> chunk_slice;
  int steps() const { return static_cast<int>(begin.size()) - 1; }
  int chunks() const { return static_cast<int>(chunk_step.size()) - 1; }
};

// The plan of `chunks` for instruction m; with `decreasing`, the instructions
// of each chunk are taken from its last k-block to its first.
ChainPlan chain_plan(const TensorCoreModel& m, std::span<const KChunk> chunks, bool decreasing);
// One chunk over [0, k): the plain chain of tensor_core_dot.
ChainPlan chain_plan(const TensorCoreModel& m, int k);

// Steps [s0, s1) of `plan` for up to Lanes output elements that share the
// decoded row (av, ae) of A, each with its own decoded column (bv[l], be[l])
// of B and accumulator acc[l]. Independent chains run interleaved to hide
// each chain's latency. [s0, s1) starts at an instruction's first step.
template <int Lanes, bool Checked>
inline void run_chain(const Finisher& fin, const ChainPlan& plan, int s0, int s1, const double* av,
                      const int* ae, const double* const* bv, const int* const* be, double* acc, int lanes) {
  const bool after = fin.c_after;
  double held[Lanes] = {};
  for (int s = s0; s < s1; ++s) {
    const auto su = static_cast<std::size_t>(s);
    const int base = plan.begin[su];
    const int cnt = plan.begin[su + 1] - base;
    if (after && plan.first[su])
      for (int l = 0; l < lanes; ++l) {
        // The instruction's steps start from -0 (the identity of IEEE
        // addition); C is added after them (CJoin::after_products).
        held[l] = acc[l];
        acc[l] = -0.0;
      }
    for (int l = 0; l < lanes; ++l)
      acc[l] = run_step<Checked>(fin, cnt, av + base, ae + base, bv[l] + base, be[l] + base, acc[l]);
    if (after && plan.last[su])
      for (int l = 0; l < lanes; ++l) acc[l] = fin.add_after(acc[l], held[l]);
  }
}

// Operands decoded (value, alignment exponent) in plan order.
struct Decoded {
  std::vector<double> value;
  std::vector<int> exponent;
};
// x[order[t] * stride] for every position t of the plan.
// b_side: x holds B's operands (model.input_b).
inline void decode_in_plan_order(const Finisher& fin, const ChainPlan& plan, const double* x,
                                 std::ptrdiff_t stride, double* value, int* exponent, bool b_side) {
  const int emin = b_side ? fin.in_emin_b : fin.in_emin;
  const double min_normal = b_side ? fin.in_min_normal_b : fin.in_min_normal;
  for (std::size_t t = 0; t < plan.order.size(); ++t) {
    const double v = x[static_cast<std::ptrdiff_t>(plan.order[t]) * stride];
    // The common case first: a normal value of the input format (binary64
    // exponent field neither 0 nor all ones, exponent >= emin) is its own
    // value with its exponent field less the bias (decode_operand's answer).
    const int e = static_cast<int>((std::bit_cast<std::uint64_t>(v) >> 52) & 0x7ff) - 1023;
    if (e >= emin && e < 1024) {
      value[t] = v;
      exponent[t] = e;
      continue;
    }
    const Operand o = decode_operand(v, emin, min_normal, fin.subnormal_inputs, fin.zero_exponent);
    value[t] = o.value;
    exponent[t] = o.exponent;
  }
}

}  // namespace rpsim::sim::tc_detail
