// The arithmetic of a kernel schedule between chunks (kernel_schedule.hpp,
// steps 3 to 6) on one output element, one definition for the CPU's
// KernelFold (kernel_fold.hpp) and the CUDA backend (RPSIM_HD): promotion
// adds, the split-K reduction (sequential, reverse, pairwise; the exact one
// is the CPU's alone), torch._scaled_mm's scale epilogue, C and the output
// conversion. FoldDesc is a plain struct a kernel takes by value.
#pragma once

#include <cstdint>

#include "rpsim/accumulation/kernel_schedule.hpp"
#include "rpsim/accumulation/tensor_core_step.hpp"
#include "rpsim/formats/host_device.hpp"
#include "rpsim/formats/scalar_convert.hpp"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace rpsim::sim {

// A schedule's fold fields (fold_desc_of, kernel_fold.cpp).
struct FoldDesc {
  RoundingMode promotion_rounding = RoundingMode::nearest_even;
  Reduction reduction = Reduction::sequential;
  FormatDesc reduction_format;  // binary32 by default
  RoundingMode reduction_rounding = RoundingMode::nearest_even;
  bool c_in_epilogue = true;  // c_placement == epilogue
  ScaleEpilogue scale_epilogue = ScaleEpilogue::product;
  FormatDesc output;
  RoundingMode output_rounding = RoundingMode::nearest_even;
  SplitKMerge merge = SplitKMerge::workspace;  // how the slices' partials meet (kernel_schedule.hpp)
};

// A schedule's fold fields (host side; kernel_fold.cpp).
FoldDesc fold_desc_of(const KernelSchedule& s);

namespace fold_detail {
RPSIM_HD_ABI_BEGIN

// binary32 operations rounded to nearest even and never fused (host_device.hpp).
using hd::add_f32;
using hd::fma_f32;
using hd::mul_f32;

RPSIM_HD_INLINE bool is_binary32(const FormatDesc& f) {
  return f.kind == FormatKind::floating && f.frac_bits == 0 && f.exp_bits == 8 && f.man_bits == 23 &&
         f.bias == 127 && f.has_sign && f.has_zero && f.subnormals && f.nonfinite == NonFinite::ieee &&
         f.nan == NanEncoding::ieee && f.overflow == Overflow::infinity;
}

// x rounded to f: on the binary64 encoding when f is IEEE-like and x and the
// result are normal (rne, rtz), else through the formats core.
RPSIM_HD_INLINE double to_format(const FormatDesc& f, RoundingMode mode, double x) {
  double r;
  const bool ieee_like = hd::has_inf(f) && f.nan == NanEncoding::ieee && f.has_sign && f.has_zero &&
                         f.subnormals && f.man_bits < 52 && f.exp_bits < 11;
  if (ieee_like && x != 0 && hd::is_finite(x) &&
      tc_detail::fast_round(x, f.man_bits, mode, f.emin, f.emax, r))
    return r;
  RoundingDesc rd;
  rd.mode = mode;
  Flags flags = 0;
  return hd::to_double(f, hd::round_binary64(f, x, rd, flags));
}

// a + b, both values of f, rounded to f: an IEEE addition.
RPSIM_HD_INLINE double add(const FormatDesc& f, RoundingMode mode, double a, double b) {
  // binary32 to nearest even is the float addition (SSE, no FTZ; the device's add.rn).
  if (mode == RoundingMode::nearest_even && is_binary32(f))
    return static_cast<double>(add_f32(static_cast<float>(a), static_cast<float>(b)));
  RoundingDesc rd;
  rd.mode = mode;
  return hd::add_values(f, a, b, rd);
}

// Chunk q's result x into its slice's partial: the first chunk of a slice
// starts it, the others are added in binary32 (promotion_rounding).
RPSIM_HD_INLINE void add_chunk(const FoldDesc& fd, bool first_of_slice, double x, double& partial) {
  partial = first_of_slice ? x : add(hd::binary32_desc(), fd.promotion_rounding, partial, x);
}

// The _scaled_mm epilogue in binary32 (kernel_schedule.hpp, scale_epilogue):
// every step a float operation to nearest even, as CUDA's epilogue functors
// compute (fmaf for `fused`).
RPSIM_HD_INLINE double scale_epilogue(const FoldDesc& fd, double acc, double c, bool has_c, double sa,
                                      double sb) {
  const auto fa = static_cast<float>(sa), fb = static_cast<float>(sb);
  const auto x = static_cast<float>(acc), fc = has_c ? static_cast<float>(c) : 0.0f;
  float t = 0;
  switch (fd.scale_epilogue) {
    case ScaleEpilogue::product: t = mul_f32(mul_f32(fa, fb), x); break;
    case ScaleEpilogue::a_then_b: t = mul_f32(fb, mul_f32(fa, x)); break;
    case ScaleEpilogue::b_then_a: t = mul_f32(fa, mul_f32(fb, x)); break;
    case ScaleEpilogue::fused:
      return has_c ? static_cast<double>(fma_f32(mul_f32(fa, fb), x, fc))
                   : static_cast<double>(mul_f32(mul_f32(fa, fb), x));
  }
  return has_c ? static_cast<double>(add_f32(t, fc)) : static_cast<double>(t);
}

// The slices' n partials (already reduced into acc by the caller when the
// reduction is exact) with C and the scales: the result in the output format.
RPSIM_HD_INLINE double finish_fold(const FoldDesc& fd, double acc, double c, double sa, double sb) {
  // cuBLAS's epilogue alpha*acc + beta*C with alpha = 1: a C of +0 stands for
  // beta = 0 (no C), which leaves a -0 result alone.
  const bool has_c = fd.c_in_epilogue && !(c == 0 && !hd::sign_bit(c));
  if (sa != 1 || sb != 1)
    return to_format(fd.output, fd.output_rounding, scale_epilogue(fd, acc, c, has_c, sa, sb));
  if (has_c)
    acc = add(fd.reduction_format, fd.reduction_rounding, acc,
              to_format(fd.reduction_format, RoundingMode::nearest_even, c));
  return to_format(fd.output, fd.output_rounding, acc);
}

// CUTLASS GemmSplitKSerial (REDUCTION_SCHEME NONE): slice 0 writes D =
// out(p0 + C), each later slice i reads D back and writes out(fl32(D + p_i))
// (its epilogue's LinearCombination with beta = 1, binary32 then the output
// conversion). The scales, when given, scale each slice's partial before it
// joins (the epilogue runs once per slice).
RPSIM_HD_INLINE double fold_serial(const FoldDesc& fd, const double* p, int n, double c, bool has_c,
                                   double sa, double sb) {
  const FormatDesc& f = fd.reduction_format;
  double d = 0;
  for (int i = 0; i < n; ++i) {
    const double x = to_format(f, fd.reduction_rounding, p[i]);
    const bool first = i == 0;
    double t;
    if (sa != 1 || sb != 1)
      t = scale_epilogue(fd, x, first ? c : d, first ? has_c : true, sa, sb);
    else if (first)
      t = has_c ? add(f, fd.reduction_rounding, x, to_format(f, RoundingMode::nearest_even, c)) : x;
    else
      t = add(f, fd.reduction_rounding, d, x);
    d = to_format(fd.output, fd.output_rounding, t);
  }
  return d;
}

// The partials p[0..n) converted to the reduction format and reduced in the
// schedule's order (not Reduction::exact), then finish_fold; merge=serial:
// fold_serial; merge=output_partials (REDUCTION_SCHEME OUTPUT_TYPE): each
// partial stored in the output format before the sum. Overwrites p.
RPSIM_HD_INLINE double fold_result(const FoldDesc& fd, double* p, int n, double c, double sa, double sb) {
  const FormatDesc& f = fd.reduction_format;
  const RoundingMode mode = fd.reduction_rounding;
  if (fd.merge == SplitKMerge::serial && n > 1)
    return fold_serial(fd, p, n, c, fd.c_in_epilogue && !(c == 0 && !hd::sign_bit(c)), sa, sb);
  if (fd.merge == SplitKMerge::output_partials && n > 1)
    for (int i = 0; i < n; ++i) p[i] = to_format(fd.output, fd.output_rounding, p[i]);
  for (int i = 0; i < n; ++i) p[i] = to_format(f, mode, p[i]);
  // The sum starts at partial 0, not at a zero: +0 + (-0) would lose a -0
  // partial (bitequiv's splitk_combine; 169 wins and no loss over 1600 recipe
  // pairs there).
  double acc = p[0];
  switch (fd.reduction) {
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
    case Reduction::exact: break;  // the CPU's (KernelFold::result)
  }
  return finish_fold(fd, acc, c, sa, sb);
}

RPSIM_HD_ABI_END
}  // namespace fold_detail
}  // namespace rpsim::sim
