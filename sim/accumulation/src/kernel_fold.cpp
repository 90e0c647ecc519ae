// Folding chunk results under a kernel schedule (kernel_fold.hpp).
#include "kernel_fold.hpp"

#include <cmath>
#include <stdexcept>

#include "rpsim/accumulation/exact_accumulator.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/formats/ops.hpp"

namespace rpsim::sim {

namespace {

// x rounded to f: on the binary64 encoding when f is IEEE-like and x and the
// result are normal (rne, rtz), else through the formats core.
double to_format(const Format& f, RoundingMode mode, double x) {
  double r;
  const bool ieee_like = f.has_inf() && f.nan == NanEncoding::ieee && f.has_sign && f.has_zero &&
                         f.subnormals && f.man_bits < 52 && f.exp_bits < 11;
  if (ieee_like && x != 0 && std::isfinite(x) &&
      tc_detail::fast_round(x, f.man_bits, mode, f.emin, f.emax, r))
    return r;
  return to_double(f, round_double(f, x, mode));
}

}  // namespace

KernelFold::KernelFold(const KernelSchedule& s, std::span<const KChunk> chunks, bool scaled)
    : s_(&s),
      plain_(!scaled && s.is_plain_chain() && chunks.size() == 1),
      slices_(chunks.empty() ? 1 : chunks.back().slice + 1) {}

double KernelFold::add(const Format& f, RoundingMode mode, double a, double b) {
  // binary32 to nearest even is the host's float addition (SSE, no FTZ).
  if (mode == RoundingMode::nearest_even && f == formats::binary32())
    return static_cast<double>(static_cast<float>(a) + static_cast<float>(b));
  Rounding r;
  r.mode = mode;
  Flags flags = 0;
  return to_double(f, rpsim::add(f, round_double(f, a), round_double(f, b), r, flags));
}

double KernelFold::result(double* p, double c, double sa, double sb) const {
  const KernelSchedule& s = *s_;
  const Format& f = s.reduction_format;
  const RoundingMode mode = s.reduction_rounding;
  const int n = slices_;
  // cuBLAS's epilogue alpha*acc + beta*C with alpha = 1: a C of +0 stands for
  // beta = 0 (no C), which leaves a -0 result alone.
  const bool has_c = s.c_placement == CPlacement::epilogue && !(c == 0 && !std::signbit(c));
  if (s.merge == SplitKMerge::serial && n > 1) return serial(p, c, has_c, sa, sb);
  // An output-typed workspace (REDUCTION_SCHEME OUTPUT_TYPE): each partial
  // is stored in the output format before the binary32 sum.
  if (s.merge == SplitKMerge::output_partials && n > 1)
    for (int i = 0; i < n; ++i) p[i] = to_format(s.output, s.output_rounding, p[i]);
  for (int i = 0; i < n; ++i) p[i] = to_format(f, mode, p[i]);
  // The sum starts at partial 0, not at a zero: +0 + (-0) would lose a -0
  // partial (bitequiv's splitk_combine; 169 wins and no loss over 1600 recipe
  // pairs there).
  double acc = p[0];
  switch (s.reduction) {
    case Reduction::sequential:
      for (int i = 1; i < n; ++i) acc = add(f, mode, acc, p[i]);
      break;
    case Reduction::reverse:
      acc = p[n - 1];
      for (int i = n - 2; i >= 0; --i) acc = add(f, mode, acc, p[i]);
      break;
    case Reduction::pairwise:
      // Adjacent pairs level by level, an odd last one carried up.
      for (int len = n; len > 1; len = (len + 1) / 2)
        for (int i = 0; i < len; i += 2) p[i / 2] = i + 1 < len ? add(f, mode, p[i], p[i + 1]) : p[i];
      acc = p[0];
      break;
    case Reduction::exact: {
      ExactAccumulator e;
      for (int i = 0; i < n; ++i) e.add(p[i]);
      Rounding r;
      r.mode = mode;
      Flags flags = 0;
      acc = to_double(f, e.round(f, r, flags));
      break;
    }
  }
  if (sa != 1 || sb != 1)
    return to_format(s.output, s.output_rounding, scale_epilogue(acc, c, has_c, sa, sb));
  if (has_c) acc = add(f, mode, acc, to_format(f, RoundingMode::nearest_even, c));
  return to_format(s.output, s.output_rounding, acc);
}

// CUTLASS GemmSplitKSerial (REDUCTION_SCHEME NONE): slice 0 writes D =
// out(p0 + C), each later slice i reads D back and writes out(fl32(D + p_i))
// (its epilogue's LinearCombination with beta = 1, binary32 then the output
// conversion). The scales, when given, scale each slice's partial before it
// joins (the epilogue runs once per slice).
double KernelFold::serial(const double* p, double c, bool has_c, double sa, double sb) const {
  const KernelSchedule& s = *s_;
  const Format& f = s.reduction_format;
  double d = 0;
  for (int i = 0; i < slices_; ++i) {
    const double x = to_format(f, s.reduction_rounding, p[i]);
    const bool first = i == 0;
    double t;
    if (sa != 1 || sb != 1)
      t = scale_epilogue(x, first ? c : d, first ? has_c : true, sa, sb);
    else if (first)
      t = has_c ? add(f, s.reduction_rounding, x, to_format(f, RoundingMode::nearest_even, c)) : x;
    else
      t = add(f, s.reduction_rounding, d, x);
    d = to_format(s.output, s.output_rounding, t);
  }
  return d;
}

// The _scaled_mm epilogue in binary32 (kernel_schedule.hpp, scale_epilogue):
// every step a float operation to nearest even, as CUDA's epilogue functors
// compute (fmaf for `fused`).
double KernelFold::scale_epilogue(double acc, double c, bool has_c, double sa, double sb) const {
  const auto fa = static_cast<float>(sa), fb = static_cast<float>(sb);
  const auto x = static_cast<float>(acc), fc = has_c ? static_cast<float>(c) : 0.0f;
  float t = 0;
  switch (s_->scale_epilogue) {
    case ScaleEpilogue::product: t = (fa * fb) * x; break;
    case ScaleEpilogue::a_then_b: t = fb * (fa * x); break;
    case ScaleEpilogue::b_then_a: t = fa * (fb * x); break;
    case ScaleEpilogue::fused:
      return has_c ? static_cast<double>(std::fma(fa * fb, x, fc)) : double((fa * fb) * x);
  }
  return has_c ? static_cast<double>(t + fc) : static_cast<double>(t);
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
