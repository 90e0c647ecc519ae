// The parameterised Tensor Core block-FMA model (see tensor_core.hpp).
#include "rpsim/accumulation/tensor_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "rpsim/formats/unpacked.hpp"
#include "tensor_core_finish.hpp"
#include "tensor_core_kernel.hpp"

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
  if (input.bits > 32 || input.man_bits > 10 || input.exp_bits > 8)
    throw std::invalid_argument(fmt::format(
        "tensor core model '{}': input format {} is wider than tf32 (products must be exact in binary64)",
        name, input.name));
  if (output.bits > 32 || output.exp_bits > 8)
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

namespace tc_detail {

Finisher::Finisher(const TensorCoreModel& m)
    : model(&m),
      frac_bits(m.result_bits()),
      out_emin(m.output.emin),
      out_emax(m.output.emax),
      in_emin(m.input.emin),
      in_min_normal(m.input.min_normal()) {
  rounding.mode = m.final_rounding;
  rounding.flush_subnormal_outputs = !m.subnormal_outputs;
  if (frac_bits != m.output.man_bits) {
    // The narrower normalisation (FP8 on Ada/H100: 13 fraction bits) as a
    // format of its own with the output's exponent range.
    narrow = m.output;
    narrow.name = fmt::format("{}-{}bit-accumulator", m.output.name, frac_bits);
    narrow.man_bits = frac_bits;
    narrow.finalize();
  }
}

double Finisher::finish_slow(bool negative, std::int64_t magnitude, int exponent) const {
  // Overflow: the hardware returns the infinity whatever the rounding
  // (Khattak & Mikaitis's model; the exponent field saturates).
  const int top = std::bit_width(static_cast<std::uint64_t>(magnitude)) - 1 + exponent;
  if (top > out_emax)
    return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  Flags flags = 0;
  const Format& f = frac_bits != model->output.man_bits ? narrow : model->output;
  const std::uint64_t bits =
      round_pack(f, negative, exponent, static_cast<u128>(magnitude), false, rounding, flags);
  const double v = to_double(f, bits);
  // A result that rounds (or flushes) to zero is +0, even from a negative sum
  // (measured on H100: see tensor_core.hpp, step 5).
  if (v == 0) return 0.0;
  return v;
}

double Finisher::add_after(double x, double c) const {
  // An IEEE addition in the output format (CJoin::after_products). x and c
  // are binary32 or binary16 values: their binary64 sum rounded once more to
  // the output format is the correctly rounded sum (53 >= 2*24 + 2, so the
  // double rounding is innocuous), IEEE signs of zero, NaN and overflow
  // included.
  Rounding nearest;
  nearest.mode = RoundingMode::nearest_even;
  nearest.flush_subnormal_outputs = rounding.flush_subnormal_outputs;
  Flags flags = 0;
  return to_double(model->output, round_double(model->output, x + c, nearest, flags));
}

StepSchedule step_schedule(const TensorCoreModel& m, int k) {
  StepSchedule s;
  s.order.reserve(static_cast<std::size_t>(k));
  const int per = m.instruction_terms();
  const int tps = m.terms_per_step;
  const int steps = per / tps;
  // Runs of g products dealt to the steps in turn; contiguous runs are the
  // case g = terms_per_step.
  const int g = m.step_interleave > 0 ? m.step_interleave : tps;
  for (int base = 0; base < k; base += per) {
    const int n = std::min(per, k - base);
    const std::size_t first_step = s.begin.size();
    for (int st = 0; st < steps; ++st) {
      const int begin = static_cast<int>(s.order.size());
      for (int run = st; run * g < n; run += steps)
        for (int i = run * g; i < std::min((run + 1) * g, n); ++i) s.order.push_back(base + i);
      if (static_cast<int>(s.order.size()) == begin) continue;  // only zero padding
      s.begin.push_back(begin);
      s.first.push_back(s.begin.size() - 1 == first_step);
      s.last.push_back(false);
    }
    if (s.last.size() > first_step) s.last.back() = true;
  }
  s.begin.push_back(static_cast<int>(s.order.size()));
  return s;
}

}  // namespace tc_detail

namespace {

using tc_detail::Operand;

// NaN if any NaN, inf*0 or inf - inf; else the infinity; nullopt when all finite.
bool non_finite_result(const double* a, const double* b, int n, double c, double& result) {
  bool any = !std::isfinite(c);
  for (int i = 0; i < n && !any; ++i) any = !std::isfinite(a[i]) || !std::isfinite(b[i]);
  if (!any) return false;
  bool pos = false, neg = false, nan = std::isnan(c);
  if (std::isinf(c)) (c > 0 ? pos : neg) = true;
  for (int i = 0; i < n; ++i) {
    const double p = a[i] * b[i];
    if (std::isnan(p)) nan = true;
    if (std::isinf(p)) (p > 0 ? pos : neg) = true;
  }
  if (nan || (pos && neg)) {
    result = std::numeric_limits<double>::quiet_NaN();
  } else {
    result = pos ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  }
  return true;
}

double step(const tc_detail::Finisher& fin, const double* a, const double* b, int n, double c) {
  double special;
  if (non_finite_result(a, b, n, c, special)) return special;
  const TensorCoreModel& m = *fin.model;
  Operand da[1024], db[1024];
  bool all_negative_zero = std::signbit(c);
  for (int i = 0; i < n; ++i) {
    da[i] = tc_detail::decode_operand(a[i], fin.in_emin, fin.in_min_normal, m.subnormal_inputs);
    db[i] = tc_detail::decode_operand(b[i], fin.in_emin, fin.in_min_normal, m.subnormal_inputs);
    all_negative_zero = all_negative_zero && std::signbit(a[i]) != std::signbit(b[i]);
  }
  int emax = 0;
  const std::int64_t sum = tc_detail::aligned_sum(
      n, [&](int i) { return da[i].value; }, [&](int i) { return da[i].exponent; },
      [&](int i) { return db[i].value; }, [&](int i) { return db[i].exponent; }, c, tc_detail::c_exponent(c),
      m.fraction_bits, m.alignment_exponent_floor, emax);
  if (sum == 0) {
    // An exact zero: -0 only when every term is -0 (IEEE 754 clause 6.3;
    // cancellation gives +0 in both round-to-nearest and toward zero).
    return emax < tc_detail::kAllZeroThreshold && all_negative_zero ? -0.0 : 0.0;
  }
  return fin.finish(sum, emax - m.fraction_bits);
}

}  // namespace

double tensor_core_step(const TensorCoreModel& model, const double* a, const double* b, int n, double c) {
  if (n > model.terms_per_step)
    throw std::invalid_argument(fmt::format("tensor core model '{}': {} products in one step, at most {}",
                                            model.name, n, model.terms_per_step));
  const tc_detail::Finisher fin(model);
  return step(fin, a, b, n, c);
}

double tensor_core_dot(const TensorCoreModel& model, std::span<const double> a, std::span<const double> b,
                       double c) {
  if (a.size() != b.size())
    throw std::invalid_argument(
        fmt::format("tensor core dot: a has {} elements, b has {}", a.size(), b.size()));
  const tc_detail::Finisher fin(model);
  const bool after = model.c_join == CJoin::after_products;
  if (model.step_interleave == 0 && !after) {
    // Contiguous steps with C in the first: one chain of steps over K.
    const std::size_t k = a.size();
    const std::size_t t = static_cast<std::size_t>(model.terms_per_step);
    for (std::size_t i = 0; i < k; i += t) {
      const int n = static_cast<int>(std::min(t, k - i));
      c = step(fin, a.data() + i, b.data() + i, n, c);
    }
    return c;
  }
  const auto sched = tc_detail::step_schedule(model, static_cast<int>(a.size()));
  std::vector<double> sa(sched.order.size()), sb(sched.order.size());
  for (std::size_t t = 0; t < sched.order.size(); ++t) {
    sa[t] = a[static_cast<std::size_t>(sched.order[t])];
    sb[t] = b[static_cast<std::size_t>(sched.order[t])];
  }
  double acc = c, held = c;
  for (std::size_t s = 0; s + 1 < sched.begin.size(); ++s) {
    if (after && sched.first[s]) {
      held = acc;
      acc = -0.0;  // the identity of IEEE addition: the steps keep the sign rules
    }
    const int b0 = sched.begin[s];
    acc = step(fin, sa.data() + b0, sb.data() + b0, sched.begin[s + 1] - b0, acc);
    if (after && sched.last[s]) acc = fin.add_after(acc, held);
  }
  return acc;
}

std::uint64_t tensor_core_dot_bits(const TensorCoreModel& model, std::span<const double> a,
                                   std::span<const double> b, double c) {
  const double d = tensor_core_dot(model, a, b, c);
  if (std::isnan(d)) {
    // NVIDIA's canonical NaN: all ones but the sign (0x7fffffff, 0x7fff).
    return model.output.bit_mask() >> 1;
  }
  return round_double(model.output, d, RoundingMode::nearest_even);
}

}  // namespace rpsim::sim
