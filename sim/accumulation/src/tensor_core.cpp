// The parameterised Tensor Core block-FMA model (see tensor_core.hpp).
#include "rpsim/accumulation/tensor_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "rpsim/accumulation/schedule_plan.hpp"
#include "rpsim/formats/unpacked.hpp"
#include "tensor_core_chain.hpp"

namespace rpsim::sim {

void TensorCoreModel::validate() const {
  if (terms_per_step < 1 || terms_per_step > 1024)
    throw std::invalid_argument(
        fmt::format("tensor core model '{}': terms_per_step {} not in 1..1024", name, terms_per_step));
  if (fraction_bits < 0 || fraction_bits > 40)
    throw std::invalid_argument(
        fmt::format("tensor core model '{}': fraction_bits {} not in 0..40", name, fraction_bits));
  if (result_fraction_bits > output.man_bits)
    throw std::invalid_argument(fmt::format(
        "tensor core model '{}': result_fraction_bits {} exceeds the output format {}'s {} fraction bits",
        name, result_fraction_bits, output.name, output.man_bits));
  for (const Format* f : {&input, &b_input()}) {
    if (datapath == Datapath::fma_chain ? f->man_bits > output.man_bits || f->exp_bits > output.exp_bits
                                        : f->bits > 32 || f->man_bits > 10 || f->exp_bits > 8)
      throw std::invalid_argument(fmt::format(
          "tensor core model '{}': input format {} is wider than {} (products must be exact in binary64)",
          name, f->name, datapath == Datapath::fma_chain ? output.name : "tf32"));
  }
  if (scale_block < 0 || (scale_block > 0 && !scale) ||
      (product_group > 0 && scale_block % product_group != 0 && product_group % scale_block != 0))
    throw std::invalid_argument(fmt::format(
        "tensor core model '{}': scale_block {} needs a scale format and must fit product_group {}", name,
        scale_block, product_group));
  if (datapath != Datapath::fma_chain && (output.bits > 32 || output.exp_bits > 8))
    throw std::invalid_argument(
        fmt::format("tensor core model '{}': output format {} is wider than binary32", name, output.name));
  if (terms_per_instruction < 0 || terms_per_instruction % terms_per_step != 0 ||
      terms_per_instruction > 1024)
    throw std::invalid_argument(fmt::format(
        "tensor core model '{}': terms_per_instruction {} is not 0 or a multiple of terms_per_step {} "
        "up to 1024",
        name, terms_per_instruction, terms_per_step));
  if (step_interleave < 0 || (step_interleave > 0 && terms_per_step % step_interleave != 0))
    throw std::invalid_argument(
        fmt::format("tensor core model '{}': step_interleave {} is not 0 or a divisor of terms_per_step {}",
                    name, step_interleave, terms_per_step));
  if (final_rounding == RoundingMode::stochastic)
    throw std::invalid_argument(
        fmt::format("tensor core model '{}': final_rounding sr is not a tensor-core mode", name));
}

TcStep tc_step_of(const TensorCoreModel& m) {
  TcStep p;
  p.align_bits = m.fraction_bits;
  p.align_floor = m.alignment_exponent_floor;
  p.c_after = m.c_join == CJoin::after_products;
  p.frac_bits = m.result_bits();
  p.out_emin = m.output.emin;
  p.out_emax = m.output.emax;
  p.in_emin = m.input.emin;
  p.in_emin_b = m.b_input().emin;
  p.in_min_normal = m.input.min_normal();
  p.in_min_normal_b = m.b_input().min_normal();
  p.zero_exponent = m.zero_exponent;
  p.subnormal_inputs = m.subnormal_inputs;
  p.mode = m.final_rounding;
  p.ftz = !m.subnormal_outputs;
  p.output = m.output;
  p.result = m.output;
  if (p.frac_bits != m.output.man_bits) {
    // The narrower normalisation (FP8 on Ada/H100: 13 fraction bits) as a
    // format of its own with the output's exponent range.
    Format narrow = m.output;
    narrow.man_bits = p.frac_bits;
    narrow.finalize();
    p.result = narrow;
  }
  p.terms_per_step = m.terms_per_step;
  p.instruction_terms = m.instruction_terms();
  p.step_interleave = m.step_interleave;
  p.scale_block = m.scale_block;
  p.scale_emin = m.scale ? m.scale->emin : 0;
  p.product_group = m.product_group;
  return p;
}

namespace tc_detail {

namespace {

// Appends the steps of the products [k0, k1) (one chunk) to `plan`: its
// instructions of instruction_terms() products from k0 (the last one
// zero-padded), each dealt to its steps by step_interleave; with
// `decreasing`, the instructions from the last to the first.
void append_chunk(const TensorCoreModel& m, int k0, int k1, bool decreasing, ChainPlan& plan) {
  const int per = m.instruction_terms();
  const int tps = m.terms_per_step;
  const int steps = per / tps;
  // Runs of g products dealt to the steps in turn; contiguous runs are the
  // case g = terms_per_step.
  const int g = m.step_interleave > 0 ? m.step_interleave : tps;
  const int instructions = (k1 - k0 + per - 1) / per;
  for (int q = 0; q < instructions; ++q) {
    const int base = k0 + (decreasing ? instructions - 1 - q : q) * per;
    const int n = std::min(per, k1 - base);
    const std::size_t first_step = plan.begin.size();
    for (int st = 0; st < steps; ++st) {
      const int begin = static_cast<int>(plan.order.size());
      for (int run = st; run * g < n; run += steps)
        for (int i = run * g; i < std::min((run + 1) * g, n); ++i) plan.order.push_back(base + i);
      if (static_cast<int>(plan.order.size()) == begin) continue;  // only zero padding
      plan.begin.push_back(begin);
      plan.first.push_back(plan.begin.size() - 1 == first_step);
      plan.last.push_back(false);
    }
    if (plan.last.size() > first_step) plan.last.back() = true;
  }
}

}  // namespace

ChainPlan chain_plan(const TensorCoreModel& m, std::span<const KChunk> chunks, bool decreasing) {
  ChainPlan plan;
  for (const KChunk& c : chunks) {
    plan.chunk_step.push_back(static_cast<int>(plan.begin.size()));
    plan.chunk_slice.push_back(c.slice);
    // A leading partial tile (KChunk::lead) is cut into instructions on its
    // own, the rest from its end: one chain over both.
    if (c.lead > 0 && c.lead < c.end - c.begin) append_chunk(m, c.begin, c.begin + c.lead, decreasing, plan);
    append_chunk(m, c.lead > 0 && c.lead < c.end - c.begin ? c.begin + c.lead : c.begin, c.end, decreasing,
                 plan);
  }
  plan.chunk_step.push_back(static_cast<int>(plan.begin.size()));
  plan.begin.push_back(static_cast<int>(plan.order.size()));
  return plan;
}

ChainPlan chain_plan(const TensorCoreModel& m, int k) {
  const KChunk all{0, k, 0};
  return chain_plan(m, std::span<const KChunk>(&all, 1), false);
}

}  // namespace tc_detail

SchedulePlan schedule_plan(const KernelSchedule& s, int k) {
  const auto chunks = s.chunks(k);
  const auto plan = tc_detail::chain_plan(s.instruction, chunks, s.k_order == KOrder::decreasing);
  SchedulePlan p;
  p.order = plan.order;
  p.begin = plan.begin;
  p.first.assign(plan.first.begin(), plan.first.end());
  p.last.assign(plan.last.begin(), plan.last.end());
  p.chunk_step = plan.chunk_step;
  p.chunk_slice = plan.chunk_slice;
  return p;
}

double tensor_core_step(const TensorCoreModel& model, const double* a, const double* b, int n, double c) {
  if (n > model.terms_per_step)
    throw std::invalid_argument(fmt::format("tensor core model '{}': {} products in one step, at most {}",
                                            model.name, n, model.terms_per_step));
  const tc_detail::Finisher fin(model);
  double av[1024], bv[1024];
  int ae[1024], be[1024];
  for (int i = 0; i < n; ++i) {
    const auto oa = tc_detail::decode_operand(a[i], fin.in_emin, fin.in_min_normal, model.subnormal_inputs,
                                              fin.zero_exponent);
    const auto ob = tc_detail::decode_operand(b[i], fin.in_emin_b, fin.in_min_normal_b,
                                              model.subnormal_inputs, fin.zero_exponent);
    av[i] = oa.value;
    ae[i] = oa.exponent;
    bv[i] = ob.value;
    be[i] = ob.exponent;
  }
  return tc_detail::run_step<true>(fin, n, av, ae, bv, be, c);
}

double tensor_core_dot(const TensorCoreModel& model, std::span<const double> a, std::span<const double> b,
                       double c) {
  if (a.size() != b.size())
    throw std::invalid_argument(
        fmt::format("tensor core dot: a has {} elements, b has {}", a.size(), b.size()));
  if (model.datapath != Datapath::block_fma || model.scale_block > 0)
    return tensor_core_dot_other(model, a, b, c, {}, {});
  const tc_detail::Finisher fin(model);
  const auto plan = tc_detail::chain_plan(model, static_cast<int>(a.size()));
  tc_detail::Decoded da, db;
  for (auto* d : {&da, &db}) {
    d->value.resize(plan.order.size());
    d->exponent.resize(plan.order.size());
  }
  tc_detail::decode_in_plan_order(fin, plan, a.data(), 1, da.value.data(), da.exponent.data(), false);
  tc_detail::decode_in_plan_order(fin, plan, b.data(), 1, db.value.data(), db.exponent.data(), true);
  const double* bv = db.value.data();
  const int* be = db.exponent.data();
  tc_detail::run_chain<1, true>(fin, plan, 0, plan.steps(), da.value.data(), da.exponent.data(), &bv, &be, &c,
                                1);
  return c;
}

std::uint64_t tensor_core_dot_bits(const TensorCoreModel& model, std::span<const double> a,
                                   std::span<const double> b, double c, std::span<const double> scale_a,
                                   std::span<const double> scale_b) {
  const double d = model.scale_block > 0 ? tensor_core_dot_other(model, a, b, c, scale_a, scale_b)
                                         : tensor_core_dot(model, a, b, c);
  if (std::isnan(d)) {
    // NVIDIA's canonical NaN: all ones but the sign (0x7fffffff, 0x7fff).
    return model.output.bit_mask() >> 1;
  }
  return round_double(model.output, d, RoundingMode::nearest_even);
}

}  // namespace rpsim::sim
