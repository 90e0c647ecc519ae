// Folding chunk results under a kernel schedule (kernel_fold.hpp).
#include "kernel_fold.hpp"

#include <cmath>
#include <stdexcept>

#include "rpsim/accumulation/exact_accumulator.hpp"
#include "rpsim/accumulation/gemm.hpp"

namespace rpsim::sim {

FoldDesc fold_desc_of(const KernelSchedule& s) {
  FoldDesc d;
  d.promotion_rounding = s.promotion_rounding;
  d.reduction = s.reduction;
  d.reduction_format = s.reduction_format;
  d.reduction_rounding = s.reduction_rounding;
  d.c_in_epilogue = s.c_placement == CPlacement::epilogue;
  d.scale_epilogue = s.scale_epilogue;
  d.output = s.output;
  d.output_rounding = s.output_rounding;
  d.merge = s.merge;
  return d;
}

KernelFold::KernelFold(const KernelSchedule& s, std::span<const KChunk> chunks, bool scaled)
    : s_(&s),
      fold_(fold_desc_of(s)),
      plain_(!scaled && s.is_plain_chain() && chunks.size() == 1),
      slices_(chunks.empty() ? 1 : chunks.back().slice + 1) {}

double KernelFold::result(double* p, double c, double sa, double sb) const {
  if (s_->reduction != Reduction::exact || (s_->merge == SplitKMerge::serial && slices_ > 1))
    return fold_detail::fold_result(fold_, p, slices_, c, sa, sb);
  // The exact reduction: one rounding of the exact sum (the CPU's alone; the
  // CUDA backend names it unsupported).
  const Format& f = s_->reduction_format;
  if (s_->merge == SplitKMerge::output_partials && slices_ > 1)
    for (int i = 0; i < slices_; ++i)
      p[i] = fold_detail::to_format(fold_.output, fold_.output_rounding, p[i]);
  ExactAccumulator e;
  for (int i = 0; i < slices_; ++i) e.add(fold_detail::to_format(f, s_->reduction_rounding, p[i]));
  Rounding r;
  r.mode = s_->reduction_rounding;
  Flags flags = 0;
  return fold_detail::finish_fold(fold_, to_double(f, e.round(f, r, flags)), c, sa, sb);
}

double merge_partials(const KernelSchedule& s, std::vector<double> partials, double c) {
  if (partials.empty()) throw std::invalid_argument("merge_partials: no partials");
  std::vector<KChunk> chunks;
  for (std::size_t i = 0; i < partials.size(); ++i) chunks.push_back({0, 0, static_cast<int>(i), 0});
  return KernelFold(s, chunks, true).result(partials.data(), c);
}

double kernel_schedule_dot(const KernelSchedule& s, const double* a, std::ptrdiff_t a_stride, const double* b,
                           std::ptrdiff_t b_stride, std::size_t k, double c) {
  const auto kk = static_cast<Eigen::Index>(k);
  Matrix am(1, kk), bm(kk, 1), cm(1, 1);
  for (Eigen::Index t = 0; t < kk; ++t) {
    am(0, t) = a[t * a_stride];
    bm(t, 0) = b[t * b_stride];
  }
  cm(0, 0) = c;
  return gemm(AccumulationModel(s), am, bm, cm)(0, 0);
}

}  // namespace rpsim::sim
