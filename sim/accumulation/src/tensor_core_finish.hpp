// The final normalisation of a block FMA step: the exact fixed-point sum
// rounded to the output format (or the narrower accumulator of FP8 paths).
// Internal to sim/.
#pragma once

#include <cstdint>

#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"
#include "tensor_core_kernel.hpp"

namespace rpsim::sim::tc_detail {

struct Finisher {
  explicit Finisher(const TensorCoreModel& m);

  const TensorCoreModel* model;
  int align_bits;   // model->fraction_bits
  int align_floor;  // model->alignment_exponent_floor
  bool c_after;     // model->c_join == CJoin::after_products
  int frac_bits;
  int out_emin, out_emax;
  int in_emin, in_emin_b;  // A's and B's input formats
  double in_min_normal, in_min_normal_b;
  int zero_exponent;  // model->zero_exponent
  Rounding rounding;
  Format narrow;  // output range, frac_bits fraction bits (when narrower)

  // sum * 2^exponent (sum != 0) rounded as the hardware does. The fast path
  // works on the binary64 encoding for normal results under rne/rtz; every
  // other case goes through round_pack, the formats core.
  double finish(std::int64_t sum, int exponent) const {
    const double v = static_cast<double>(sum) * pow2(exponent);  // exact: |sum| < 2^53
    double r;
    if (fast_round(v, frac_bits, rounding.mode, out_emin, out_emax, r)) return r;
    return finish_slow(sum < 0, sum < 0 ? -sum : sum, exponent);
  }
  double finish_slow(bool negative, std::int64_t magnitude, int exponent) const;
  // C added to an instruction's result x (c_join = after_products): an IEEE
  // addition in the output format, rounded to nearest even. x and c are
  // values of the output format.
  double add_after(double x, double c) const;
};

}  // namespace rpsim::sim::tc_detail
