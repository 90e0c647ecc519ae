// The arithmetic of a kernel schedule between chunks (kernel_schedule.hpp,
// steps 3 to 6): promotion adds, the split-K reduction, C in the epilogue,
// the output conversion. Internal to sim/accumulation.
#pragma once

#include <span>
#include <vector>

#include "rpsim/accumulation/kernel_schedule.hpp"
#include "tensor_core_chain.hpp"

namespace rpsim::sim {

class KernelFold {
 public:
  KernelFold(const KernelSchedule& s, std::span<const KChunk> chunks);

  // One chunk and nothing to fold: the chunk's chain is the result.
  bool plain() const { return plain_; }
  // C is the start of the first chunk's chain (else it joins in the epilogue).
  bool c_starts_chain() const { return s_->c_placement == CPlacement::accumulator; }
  int slices() const { return slices_; }
  // Chunk q's result x into its slice's partial (partials[slice]): the first
  // chunk of a slice starts it, the others are added in binary32
  // (promotion_rounding).
  void add_chunk(const tc_detail::ChainPlan& plan, int q, double x, double* partials) const {
    const int slice = plan.chunk_slice[static_cast<std::size_t>(q)];
    const bool first = q == 0 || plan.chunk_slice[static_cast<std::size_t>(q) - 1] != slice;
    partials[slice] = first ? x : add(formats::binary32(), s_->promotion_rounding, partials[slice], x);
  }
  // The slices' partials reduced, C added in the epilogue, the result in the
  // output format. Overwrites partials.
  double result(double* partials, double c) const;

  // a + b, both values of f, rounded to f: an IEEE addition.
  static double add(const Format& f, RoundingMode mode, double a, double b);

 private:
  const KernelSchedule* s_;
  bool plain_;
  int slices_;
};

// sum_i a_i*b_i + c under a schedule: a 1 x K by K x 1 GEMM.
double kernel_schedule_dot(const KernelSchedule& s, const double* a, std::ptrdiff_t a_stride, const double* b,
                           std::ptrdiff_t b_stride, std::size_t k, double c);

}  // namespace rpsim::sim
