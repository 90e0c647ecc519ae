// The arithmetic of a kernel schedule between chunks (kernel_schedule.hpp,
// steps 3 to 6): promotion adds, the split-K reduction, C in the epilogue,
// the output conversion. Internal to sim/accumulation.
#pragma once

#include <span>
#include <vector>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/accumulation/schedule_fold.hpp"
#include "tensor_core_chain.hpp"

namespace rpsim::sim {

class KernelFold {
 public:
  // `scaled`: the GEMM has _scaled_mm scales, which the epilogue applies
  // (result's sa, sb), so even one chunk is folded.
  KernelFold(const KernelSchedule& s, std::span<const KChunk> chunks, bool scaled = false);

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
    fold_detail::add_chunk(fold_, first, x, partials[slice]);
  }
  // The slices' partials reduced, scaled by the _scaled_mm scales sa, sb
  // (scale_epilogue; 1 and 1 leave them alone), C added in the epilogue, the
  // result in the output format. Overwrites partials.
  double result(double* partials, double c, double sa = 1, double sb = 1) const;
  // The fold's arithmetic as the shared code (schedule_fold.hpp) takes it.
  const FoldDesc& desc() const { return fold_; }

 private:
  const KernelSchedule* s_;
  FoldDesc fold_;
  bool plain_;
  int slices_;
};

// D = A*B + C under a schedule with _scaled_mm scales (gemm.hpp
// GemmScales: scale_a 1x1 or Mx1, scale_b 1x1 or 1xN, either may be null),
// applied by the schedule's scale_epilogue (gemm.cpp).
Matrix gemm_schedule_scaled(const KernelSchedule& s, const Matrix& a, const Matrix& b, const Matrix& c,
                            const Matrix* scale_a, const Matrix* scale_b, int threads);

// sum_i a_i*b_i + c under a schedule: a 1 x K by K x 1 GEMM.
double kernel_schedule_dot(const KernelSchedule& s, const double* a, std::ptrdiff_t a_stride, const double* b,
                           std::ptrdiff_t b_stride, std::size_t k, double c);

}  // namespace rpsim::sim
