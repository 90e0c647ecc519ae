// GEMM under an accumulation model. Tensor Core models and kernel schedules
// on the block-FMA datapath share one executor (gemm_chains.hpp: operands
// decoded once, one step chain per element, chunk results folded as the
// schedule says); this file converts the operands and dispatches.
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/gemm_kernel.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include "gemm_chains.hpp"
#include "kernel_fold.hpp"
#include "kernel_simt.hpp"
#include "rpsim/accumulation/native_gemm.hpp"
#include "rpsim/formats/array.hpp"
#include "rpsim/formats/random.hpp"

namespace rpsim::sim {

namespace {

// The native kernels' product for sequential:binary32:rne and
// sequential:binary64:rne (not fused) from a C of +0 entries (each chain
// starts at +0, as the kernels' do: a C of -0 would make an all -0 chain -0),
// where they apply (binary32: every operand a binary32 value); nothing
// otherwise. The per-element dot below computes the same bits in several
// times the time (rpsim.gemm at 128x128x256: 23 ms against 3.6 ms), and FP8
// block scaling's per-tile products took most of its step there.
std::optional<Matrix> native_product(const AccumulationModel& model, const Matrix& a, const Matrix& b,
                                     const Matrix& c, const GemmOptions& options) {
  const auto* seq = std::get_if<Sequential>(&model.variant());
  if (!seq || seq->fused || seq->acc.rounding != RoundingMode::nearest_even) return std::nullopt;
  const bool f32 = seq->acc.format == formats::binary32(), f64 = seq->acc.format == formats::binary64();
  if (!f32 && !f64) return std::nullopt;
  for (Eigen::Index i = 0; i < c.size(); ++i)
    if (c.data()[i] != 0 || std::signbit(c.data()[i])) return std::nullopt;
  const int threads = options.threads > 0 ? options.threads : 1;
  if (f64) return native::matmul_binary64(a, b, native::Transposed::none, threads);
  return native::matmul_binary32(a, b, native::Transposed::none, threads);
}

void check_shapes(const Matrix& a, const Matrix& b, const Matrix& c) {
  if (a.cols() != b.rows())
    throw std::invalid_argument(
        fmt::format("gemm: A is {}x{} but B is {}x{} (A's columns must equal B's rows)", a.rows(), a.cols(),
                    b.rows(), b.cols()));
  if (c.rows() != a.rows() || c.cols() != b.cols())
    throw std::invalid_argument(
        fmt::format("gemm: C is {}x{} but A*B is {}x{}", c.rows(), c.cols(), a.rows(), b.cols()));
}

// The stored values converted to the instruction's input format
// (kernel_schedule.hpp step 1; the identity on values of that format).
Matrix converted(const Matrix& m, const KernelSchedule& s) {
  Matrix r(m.rows(), m.cols());
  ArrayOptions o;
  o.rounding.mode = s.input_rounding;
  o.threads = 1;
  round_values(s.instruction.input, std::span<const double>(m.data(), static_cast<std::size_t>(m.size())),
               std::span<double>(r.data(), static_cast<std::size_t>(r.size())), o);
  return r;
}

// The operands in the instruction's input format: the stored ones
// themselves, without a copy, when they already are (holder keeps a
// conversion alive).
const Matrix& in_input_format(const Matrix& m, const KernelSchedule& s, Matrix& holder) {
  if (s.stored == s.instruction.input) return m;
  holder = converted(m, s);
  return holder;
}

// Datapaths other than NVIDIA's block FMA (AMD mfma, FP64 FMA chains) and
// block-scaled models: one element at a time through tensor_core_dot, for a
// plain chain over k only (no kernel schedule models them yet).
Matrix gemm_elementwise(const KernelSchedule& s, const Matrix& a_in, const Matrix& b_in, const Matrix& c) {
  const auto& m = s.instruction;
  if (m.scale_block > 0)
    throw std::invalid_argument(fmt::format(
        "gemm: '{}' takes block scales: give SFA and SFB (gemm.hpp GemmScales; rpsim.gemm sfa=, sfb=)",
        m.name));
  const KernelFold fold(s, s.chunks(static_cast<int>(a_in.cols())));
  if (!fold.plain() || s.k_order == KOrder::decreasing)
    throw std::invalid_argument(fmt::format(
        "gemm: the '{}' datapath runs as a plain chain over k only, not under a kernel schedule", m.name));
  const Matrix a = s.stored == m.input ? a_in : converted(a_in, s);
  const Matrix b = s.stored == m.input ? b_in : converted(b_in, s);
  Matrix d(a.rows(), b.cols());
  std::vector<double> row(static_cast<std::size_t>(a.cols()));
  for (Eigen::Index i = 0; i < a.rows(); ++i) {
    for (Eigen::Index k = 0; k < a.cols(); ++k) row[static_cast<std::size_t>(k)] = a(i, k);
    for (Eigen::Index j = 0; j < b.cols(); ++j)
      d(i, j) = tensor_core_dot(m, row, std::span<const double>(b.col(j).data(), row.size()), c(i, j));
  }
  return d;
}

Matrix gemm_schedule(const KernelSchedule& s, const Matrix& a_in, const Matrix& b_in, const Matrix& c,
                     const GemmOptions& options, const TensorScales& ts = {}) {
  // A CUDA-core kernel multiplies the stored values; no instruction runs.
  if (s.simt != SimtOrder::none) return gemm_simt(s, a_in, b_in, c, options.threads, ts);
  if (s.instruction.datapath != Datapath::block_fma || s.instruction.scale_block > 0) {
    if (ts.a || ts.b)
      throw std::invalid_argument(
          fmt::format("gemm: scale_a/scale_b under a kernel schedule need a block-FMA instruction, not '{}'",
                      s.instruction.name));
    return gemm_elementwise(s, a_in, b_in, c);
  }
  Matrix ah, bh;
  const Matrix& a = in_input_format(a_in, s, ah);
  const Matrix& b = in_input_format(b_in, s, bh);
  return std::move(gemm_chains({s}, a, b, c, options, nullptr, ts).front());
}

// Eigen's binary64 GEMM on fixed blocks of 64 rows: every block is one
// single-threaded Eigen product of the same shape whatever the thread count.
// omp_set_num_threads(1) inside the region (a per-task setting) stops Eigen
// from parallelising a product itself, which would change its blocking over
// K and with it the summation order.
Matrix gemm_eigen(const Matrix& a, const Matrix& b, const Matrix& c, const GemmOptions& options) {
  const Eigen::Index m = a.rows();
  constexpr Eigen::Index block = 64;
  const Eigen::Index blocks = (m + block - 1) / block;
  Matrix d = c;
#pragma omp parallel num_threads(options.threads > 0 ? options.threads : 1)
  {
    omp_set_num_threads(1);
#pragma omp for schedule(static)
    for (Eigen::Index t = 0; t < blocks; ++t) {
      const Eigen::Index r0 = t * block, len = std::min(block, m - r0);
      d.middleRows(r0, len).noalias() += a.middleRows(r0, len) * b;
    }
  }
  return d;
}

}  // namespace

Matrix gemm(const AccumulationModel& model, const Matrix& a, const Matrix& b, const Matrix& c,
            const GemmOptions& options) {
  check_shapes(a, b, c);
  if (const auto* ks = std::get_if<KernelSchedule>(&model.variant()))
    return gemm_schedule(*ks, a, b, c, options);
  if (const auto* kp = std::get_if<KernelPreset>(&model.variant()))
    return gemm_schedule(kp->for_shape(a.rows(), b.cols(), a.cols()), a, b, c, options);
  if (std::holds_alternative<EigenGemm>(model.variant())) return gemm_eigen(a, b, c, options);
  if (auto d = native_product(model, a, b, c, options)) return std::move(*d);
  const Eigen::Index m = a.rows(), n = b.cols(), k = a.cols();
  Matrix d(m, n);
#pragma omp parallel for schedule(dynamic, 4) num_threads(options.threads > 0 ? options.threads : 1)
  for (Eigen::Index i = 0; i < m; ++i) {
    std::vector<double> row(static_cast<std::size_t>(k));
    for (Eigen::Index t = 0; t < k; ++t) row[static_cast<std::size_t>(t)] = a(i, t);
    for (Eigen::Index j = 0; j < n; ++j)
      d(i, j) = model.dot_strided(
          row.data(), 1, b.col(j).data(), 1, static_cast<std::size_t>(k), c(i, j),
          static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(n) + static_cast<std::uint64_t>(j));
  }
  return d;
}

Matrix gemm_schedule_scaled(const KernelSchedule& s, const Matrix& a, const Matrix& b, const Matrix& c,
                            const Matrix* scale_a, const Matrix* scale_b, int threads) {
  check_shapes(a, b, c);
  if ((scale_a || scale_b) && s.c_placement != CPlacement::epilogue)
    throw std::invalid_argument(
        "gemm: scale_a/scale_b need c_placement=epilogue (_scaled_mm scales A*B, never C)");
  return gemm_schedule(s, a, b, c, GemmOptions{threads}, TensorScales{scale_a, scale_b});
}

Matrix gemm(const AccumulationModel& model, const Matrix& a, const Matrix& b, const GemmOptions& options) {
  return gemm(model, a, b, Matrix::Zero(a.rows(), b.cols()), options);
}

// The schedule with its fold fields (how chunk results are combined) set to
// one value.
std::string fold_group_key(KernelSchedule s) {
  s.promotion_rounding = RoundingMode::nearest_even;
  s.reduction = Reduction::sequential;
  s.merge = SplitKMerge::workspace;
  s.reduction_format = formats::binary32();
  s.reduction_rounding = RoundingMode::nearest_even;
  s.output = s.instruction.output;
  s.output_rounding = RoundingMode::nearest_even;
  return AccumulationModel(s).spec();
}

namespace {

// gemm_fold_group's and gemm_fold_group_blocks': the group under one
// schedule's chains, else an exception naming the one that differs.
void check_group(const std::vector<KernelSchedule>& group, int k) {
  const KernelSchedule& s = group.front();
  const auto chunks = s.chunks(k);
  for (const auto& g : group)
    if (fold_group_key(g) != fold_group_key(s) || g.chunks(k) != chunks)
      throw std::invalid_argument("gemm_fold_group: '" + AccumulationModel(g).spec() +
                                  "' runs other chains than '" + AccumulationModel(s).spec() + "'");
}

bool block_fma(const KernelSchedule& s) {
  return s.simt == SimtOrder::none && s.instruction.datapath == Datapath::block_fma &&
         s.instruction.scale_block == 0;
}

}  // namespace

std::vector<Matrix> gemm_fold_group(const std::vector<KernelSchedule>& group, const Matrix& a_in,
                                    const Matrix& b_in, const Matrix& c, const GemmOptions& options) {
  check_shapes(a_in, b_in, c);
  std::vector<Matrix> d;
  if (group.empty()) return d;
  check_group(group, static_cast<int>(a_in.cols()));
  const KernelSchedule& s = group.front();
  if (!block_fma(s)) {
    for (const auto& g : group) d.push_back(gemm_schedule(g, a_in, b_in, c, options));
    return d;
  }
  Matrix ah, bh;
  const Matrix& a = in_input_format(a_in, s, ah);
  const Matrix& b = in_input_format(b_in, s, bh);
  return gemm_chains(group, a, b, c, options);
}

std::vector<Matrix> gemm_fold_group_blocks(const std::vector<KernelSchedule>& group, const Matrix& a_in,
                                           const Matrix& b_in, const Matrix& c, const GemmOptions& options,
                                           const RowBlockDone& done) {
  check_shapes(a_in, b_in, c);
  if (group.empty()) return {};
  check_group(group, static_cast<int>(a_in.cols()));
  const KernelSchedule& s = group.front();
  if (block_fma(s)) {
    Matrix ah, bh;
    const Matrix& a = in_input_format(a_in, s, ah);
    const Matrix& b = in_input_format(b_in, s, bh);
    return gemm_chains(group, a, b, c, options, &done);
  }
  // Other datapaths, element by element: each block on its own.
  std::vector<Matrix> d(group.size(), Matrix(a_in.rows(), b_in.cols()));
  Eigen::Index block = kFirstRowBlock;
  for (Eigen::Index r0 = 0; r0 < a_in.rows(); r0 += block, block = std::min(2 * block, kLastRowBlock)) {
    const Eigen::Index len = std::min(block, a_in.rows() - r0);
    for (std::size_t g = 0; g < group.size(); ++g)
      d[g].middleRows(r0, len) =
          gemm_schedule(group[g], a_in.middleRows(r0, len), b_in, c.middleRows(r0, len), options);
    if (!done(r0, len, d)) break;
  }
  return d;
}

// By the array kernel, whose every element is the scalar core's rounding
// (stochastic draws included: counter_random(seed, 0, index), the draw the
// scalar loop here made): a scalar round_double + to_double per element was
// 40% of an rpsim.gemm call under sequential:fp64:rne at 128x784x256. An
// inf or NaN is kept as given, and a NaN from a finite entry is to_double's
// (the array path keeps the NaN code's payload bits).
Matrix round_to_format(const Matrix& m, const Format& fmt, RoundingMode mode, std::uint64_t seed) {
  Matrix r(m.rows(), m.cols());
  ArrayOptions options;
  options.rounding.mode = mode;
  options.seed = seed;
  round_values(fmt, std::span<const double>(m.data(), std::size_t(m.size())),
               std::span<double>(r.data(), std::size_t(r.size())), options);
  for (Eigen::Index idx = 0; idx < m.size(); ++idx) {
    const double x = m.data()[idx];
    if (!std::isfinite(x))
      r.data()[idx] = x;
    else if (std::isnan(r.data()[idx]))  // a format with no infinity (e4m3): to_double's quiet NaN, signed
      r.data()[idx] = std::copysign(std::numeric_limits<double>::quiet_NaN(), r.data()[idx]);
  }
  return r;
}

}  // namespace rpsim::sim
