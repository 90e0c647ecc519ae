// Scaled GEMMs (gemm.hpp, GemmScales): block scales through the instruction
// model, and torch._scaled_mm-style per-tensor / per-row binary32 scales as
// an epilogue. Kept apart from gemm.cpp's block-FMA executor: the scales act
// per instruction (per 16 or 32 products), not inside its hot loop.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernel_fold.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/accumulation/tensor_core_instruction.hpp"
#include "rpsim/formats/rounding.hpp"
#include "tensor_core_finish.hpp"

namespace rpsim::sim {

namespace {

const TensorCoreModel* block_scaled_model(const AccumulationModel& model) {
  const auto* tc = model.bare_instruction();
  return tc && tc->scale_block > 0 ? tc : nullptr;
}

void check_shape(const char* name, const Matrix& x, Eigen::Index rows, Eigen::Index cols, const char* what) {
  if (x.rows() != rows || x.cols() != cols)
    throw std::invalid_argument(
        fmt::format("{}: expected {}x{} ({}), given {}x{}", name, rows, cols, what, x.rows(), x.cols()));
}

// Every element a value of the scale format (NaN included: the 0xff of
// E8M0, which makes the block's results NaN).
void check_scale_values(const char* name, const Matrix& x, const Format& f) {
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
      const double v = std::fabs(x(i, j));
      if (std::isnan(v)) continue;
      if (to_double(f, round_double(f, v, RoundingMode::nearest_even)) != v || (v == 0 && f.man_bits == 0))
        throw std::invalid_argument(fmt::format("{}[{}, {}] = {} is not a value of the scale format {}", name,
                                                i, j, x(i, j), f.name));
    }
}

void check_block_scales(const TensorCoreModel& tc, Eigen::Index m, Eigen::Index k, Eigen::Index n,
                        const GemmScales& s) {
  if (!s.sfa || !s.sfb)
    throw std::invalid_argument(fmt::format("{}: model '{}' takes block scales: give both SFA and SFB",
                                            s.sfa ? "SFB" : "SFA", tc.name));
  if (k % tc.scale_block != 0)
    throw std::invalid_argument(fmt::format("K: {} is not a multiple of the block {} (scale_block of '{}')",
                                            k, tc.scale_block, tc.name));
  const std::string along_a = fmt::format("M x K/{}", tc.scale_block),
                    along_b = fmt::format("K/{} x N", tc.scale_block);
  check_shape("SFA", *s.sfa, m, k / tc.scale_block, along_a.c_str());
  check_shape("SFB", *s.sfb, k / tc.scale_block, n, along_b.c_str());
  check_scale_values("SFA", *s.sfa, *tc.scale);
  check_scale_values("SFB", *s.sfb, *tc.scale);
}

void check_tensor_scale(const char* name, const Matrix& x, Eigen::Index len, bool row) {
  const bool ok = (x.rows() == 1 && x.cols() == 1) ||
                  (row ? x.rows() == len && x.cols() == 1 : x.rows() == 1 && x.cols() == len);
  if (!ok)
    throw std::invalid_argument(fmt::format("{}: expected 1x1 (per tensor) or {} (per {}), given {}x{}", name,
                                            row ? fmt::format("{}x1", len) : fmt::format("1x{}", len),
                                            row ? "row of A" : "column of B", x.rows(), x.cols()));
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const double v = x.data()[i];
    if (!std::isfinite(v) || v <= 0 || static_cast<double>(static_cast<float>(v)) != v)
      throw std::invalid_argument(
          fmt::format("{}[{}] = {} is not a finite positive binary32 value", name, i, v));
  }
}

// Without product groups (mxf8f6f4), each row of A and column of B is
// decoded with its scales once (block_scaled_operands), not once per element
// of D; each element then runs its chain of instructions over the decoded
// runs, an instruction with a NaN scale in its blocks giving the default NaN
// (block_scaled_instruction's order, the same bits). Product groups
// (mxf4nvf4) sum each group's raw products per element, so they take the
// per-element instruction.
Matrix block_scaled_gemm(const TensorCoreModel& tc, const Matrix& a, const Matrix& b, const Matrix& c,
                         const Matrix& sfa, const Matrix& sfb, const GemmOptions& options) {
  const Eigen::Index m = a.rows(), n = b.cols(), k = a.cols(), blocks = sfa.cols();
  const int threads = options.threads > 0 ? options.threads : 1;
  Matrix d(m, n);
  if (tc.product_group > 0) {
#pragma omp parallel num_threads(threads)
    {
      std::vector<double> row(static_cast<std::size_t>(k)), srow(static_cast<std::size_t>(blocks));
#pragma omp for schedule(dynamic, 4)
      for (Eigen::Index i = 0; i < m; ++i) {
        for (Eigen::Index t = 0; t < k; ++t) row[std::size_t(t)] = a(i, t);
        for (Eigen::Index t = 0; t < blocks; ++t) srow[std::size_t(t)] = sfa(i, t);
        for (Eigen::Index j = 0; j < n; ++j)
          d(i, j) =
              tensor_core_dot_other(tc, row, std::span<const double>(b.col(j).data(), row.size()), c(i, j),
                                    srow, std::span<const double>(sfb.col(j).data(), srow.size()));
      }
    }
    return d;
  }
  const tc_detail::Finisher fin(tc);
  const Eigen::Index per = tc.instruction_terms(), blk = tc.scale_block;
  const Eigen::Index steps = (k + per - 1) / per;
  const auto kk = static_cast<std::size_t>(k);
  std::vector<double> av(kk * std::size_t(m)), bv(kk * std::size_t(n));
  std::vector<int> ae(av.size()), be(bv.size());
  // nan_a(i, s) / nan_b(s, j): a NaN scale among instruction s's blocks.
  Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic> nan_a(m, steps), nan_b(steps, n);
  const auto any_nan = [&](const double* x, Eigen::Index stride, Eigen::Index s) {
    for (Eigen::Index t = s * per / blk; t < std::min(blocks, (s + 1) * per / blk); ++t)
      if (std::isnan(x[t * stride])) return true;
    return false;
  };
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (Eigen::Index i = 0; i < m; ++i) {
      tc_detail::block_scaled_operands(fin, a.data() + i, m, int(k), sfa.data() + i, m, false, &av[kk * i],
                                       &ae[kk * i]);
      for (Eigen::Index s = 0; s < steps; ++s) nan_a(i, s) = any_nan(sfa.data() + i, m, s);
    }
#pragma omp for schedule(static)
    for (Eigen::Index j = 0; j < n; ++j) {
      tc_detail::block_scaled_operands(fin, b.col(j).data(), 1, int(k), sfb.col(j).data(), 1, true,
                                       &bv[kk * j], &be[kk * j]);
      for (Eigen::Index s = 0; s < steps; ++s) nan_b(s, j) = any_nan(sfb.col(j).data(), 1, s);
    }
#pragma omp for schedule(dynamic, 4)
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        double acc = c(i, j);
        for (Eigen::Index s = 0; s < steps; ++s) {
          const std::size_t at = std::size_t(s * per);
          acc = nan_a(i, s) || nan_b(s, j)
                    ? hd::quiet_nan()
                    : tc_detail::run_step<true>(fin, int(std::min(per, k - s * per)), &av[kk * i + at],
                                                &ae[kk * i + at], &bv[kk * j + at], &be[kk * j + at], acc);
        }
        d(i, j) = acc;
      }
  }
  return d;
}

}  // namespace

void check_gemm_scales(const AccumulationModel& model, Eigen::Index m, Eigen::Index k, Eigen::Index n,
                       const GemmScales& s) {
  if (const auto* tc = block_scaled_model(model)) {
    check_block_scales(*tc, m, k, n, s);
  } else if (s.sfa || s.sfb) {
    throw std::invalid_argument(
        fmt::format("{}: model '{}' takes no block scales (name a block-scaled instruction, e.g. "
                    "tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0 or tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3)",
                    s.sfa ? "SFA" : "SFB", model.spec()));
  }
  if (s.scale_a) check_tensor_scale("scale_a", *s.scale_a, m, true);
  if (s.scale_b) check_tensor_scale("scale_b", *s.scale_b, n, false);
}

Matrix gemm(const AccumulationModel& model, const Matrix& a, const Matrix& b, const Matrix& c,
            const GemmScales& s, const GemmOptions& options) {
  if (a.cols() != b.rows() || c.rows() != a.rows() || c.cols() != b.cols())
    return gemm(model, a, b, c, options);
  const auto* tc = block_scaled_model(model);
  if (s.empty() && !tc) return gemm(model, a, b, c, options);
  check_gemm_scales(model, a.rows(), a.cols(), b.cols(), s);
  const bool epilogue = s.scale_a || s.scale_b;
  // A kernel schedule applies the scales itself, before its output rounding
  // (kernel_schedule.hpp, scale_epilogue). A bare instruction (a tc: spec,
  // held as a one-chain schedule) has no epilogue of its own: its scales
  // apply after it, below.
  const auto& v = model.variant();
  if (epilogue && !tc && !model.bare_instruction() &&
      (std::holds_alternative<KernelSchedule>(v) || std::holds_alternative<KernelPreset>(v))) {
    // A preset given per-row / per-column scales takes torch's per-row path
    // (scales=row, its own epilogue: kernel_presets.cpp), as torch picks the
    // kernel from the scales' shape.
    const auto preset_schedule = [&](KernelPreset p) {
      p.row_scales =
          p.row_scales || (s.scale_a && s.scale_a->size() > 1) || (s.scale_b && s.scale_b->size() > 1);
      return p.for_shape(a.rows(), b.cols(), a.cols());
    };
    const KernelSchedule ks = std::holds_alternative<KernelSchedule>(v)
                                  ? std::get<KernelSchedule>(v)
                                  : preset_schedule(std::get<KernelPreset>(v));
    return gemm_schedule_scaled(ks, a, b, c, s.scale_a ? &*s.scale_a : nullptr,
                                s.scale_b ? &*s.scale_b : nullptr, options.threads);
  }
  const Matrix zero = Matrix::Zero(c.rows(), c.cols());
  const Matrix& c0 = epilogue ? zero : c;
  Matrix d = tc ? block_scaled_gemm(*tc, a, b, c0, *s.sfa, *s.sfb, options) : gemm(model, a, b, c0, options);
  if (!epilogue) return d;
  const Format& f32 = formats::binary32();
  const Format& out = model.output_format();
  for (Eigen::Index i = 0; i < d.rows(); ++i)
    for (Eigen::Index j = 0; j < d.cols(); ++j) {
      const double sa = !s.scale_a ? 1.0 : s.scale_a->size() == 1 ? (*s.scale_a)(0, 0) : (*s.scale_a)(i, 0);
      const double sb = !s.scale_b ? 1.0 : s.scale_b->size() == 1 ? (*s.scale_b)(0, 0) : (*s.scale_b)(0, j);
      const double scale = to_double(f32, round_double(f32, sa * sb, RoundingMode::nearest_even));
      const double t = to_double(f32, round_double(f32, scale * d(i, j), RoundingMode::nearest_even));
      d(i, j) = to_double(out, round_double(out, t + c(i, j), RoundingMode::nearest_even));
    }
  return d;
}

}  // namespace rpsim::sim
