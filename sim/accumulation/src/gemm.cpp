// GEMM under an accumulation model. Tensor Core models and kernel schedules
// share one executor: A's rows and B's columns are decoded once, in the order
// the plan's steps take the products, then every output element runs the
// one step chain (tensor_core_chain.hpp) chunk by chunk, and the chunk
// results are folded as the schedule says (kernel_fold.hpp).
#include "rpsim/accumulation/gemm.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernel_fold.hpp"
#include "rpsim/formats/array.hpp"
#include "rpsim/formats/random.hpp"
#include "tensor_core_chain.hpp"

namespace rpsim::sim {

namespace {

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

// Every column of B decoded in plan order, column j at [j*P, (j+1)*P).
tc_detail::Decoded decode_columns(const tc_detail::Finisher& fin, const tc_detail::ChainPlan& plan,
                                  const Matrix& b) {
  const std::size_t p = plan.order.size();
  tc_detail::Decoded d;
  d.value.resize(p * static_cast<std::size_t>(b.cols()));
  d.exponent.resize(d.value.size());
  for (Eigen::Index j = 0; j < b.cols(); ++j)
    tc_detail::decode_in_plan_order(fin, plan, b.col(j).data(), 1, d.value.data() + std::size_t(j) * p,
                                    d.exponent.data() + std::size_t(j) * p, true);
  return d;
}

constexpr int kLanes = 4;

// One row of D, kLanes elements at a time: each element a serial chain of
// steps, so interleaving independent chains hides their latency.
template <bool Checked>
void gemm_row(const tc_detail::Finisher& fin, const tc_detail::ChainPlan& plan, const KernelFold& fold,
              const double* av, const int* ae, const tc_detail::Decoded& bd, const Matrix& c, Eigen::Index i,
              Matrix& d, std::vector<double>& partials) {
  const std::size_t p = plan.order.size();
  const Eigen::Index n = d.cols();
  const int chunks = plan.chunks();
  for (Eigen::Index j0 = 0; j0 < n; j0 += kLanes) {
    const int lanes = static_cast<int>(std::min<Eigen::Index>(kLanes, n - j0));
    const double* bv[kLanes];
    const int* be[kLanes];
    double acc[kLanes];
    for (int l = 0; l < lanes; ++l) {
      bv[l] = bd.value.data() + static_cast<std::size_t>(j0 + l) * p;
      be[l] = bd.exponent.data() + static_cast<std::size_t>(j0 + l) * p;
    }
    for (int q = 0; q < chunks; ++q) {
      for (int l = 0; l < lanes; ++l) acc[l] = q == 0 && fold.c_starts_chain() ? c(i, j0 + l) : 0.0;
      tc_detail::run_chain<kLanes, Checked>(fin, plan, plan.chunk_step[std::size_t(q)],
                                            plan.chunk_step[std::size_t(q) + 1], av, ae, bv, be, acc, lanes);
      if (fold.plain()) break;  // one chunk, nothing to fold
      for (int l = 0; l < lanes; ++l) fold.add_chunk(plan, q, acc[l], partials.data() + l * fold.slices());
    }
    for (int l = 0; l < lanes; ++l)
      d(i, j0 + l) = fold.plain() ? acc[l] : fold.result(partials.data() + l * fold.slices(), c(i, j0 + l));
  }
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
                     const GemmOptions& options) {
  if (s.instruction.datapath != Datapath::block_fma || s.instruction.scale_block > 0)
    return gemm_elementwise(s, a_in, b_in, c);
  const Matrix a = s.stored == s.instruction.input ? a_in : converted(a_in, s);
  const Matrix b = s.stored == s.instruction.input ? b_in : converted(b_in, s);
  const Eigen::Index m = a.rows(), n = b.cols();
  const int k = static_cast<int>(a.cols());
  const tc_detail::Finisher fin(s.instruction);
  const auto chunks = s.chunks(k);
  const auto plan = tc_detail::chain_plan(s.instruction, chunks, s.k_order == KOrder::decreasing);
  const KernelFold fold(s, chunks);
  const tc_detail::Decoded bd = decode_columns(fin, plan, b);
  const bool finite = a.allFinite() && b.allFinite();
  const std::size_t p = plan.order.size();
  Matrix d(m, n);
#pragma omp parallel num_threads(options.threads > 0 ? options.threads : 1)
  {
    std::vector<double> av(p), partials(static_cast<std::size_t>(kLanes * fold.slices()));
    std::vector<int> ae(p);
#pragma omp for schedule(dynamic, 4)
    for (Eigen::Index i = 0; i < m; ++i) {
      tc_detail::decode_in_plan_order(fin, plan, a.data() + i, a.rows(), av.data(), ae.data(), false);
      if (finite)
        gemm_row<false>(fin, plan, fold, av.data(), ae.data(), bd, c, i, d, partials);
      else
        gemm_row<true>(fin, plan, fold, av.data(), ae.data(), bd, c, i, d, partials);
    }
  }
  return d;
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
  if (const auto* tc = std::get_if<TensorCoreModel>(&model.variant()))
    return gemm_schedule(KernelSchedule::of_instruction(*tc), a, b, c, options);
  if (const auto* ks = std::get_if<KernelSchedule>(&model.variant()))
    return gemm_schedule(*ks, a, b, c, options);
  if (const auto* kp = std::get_if<KernelPreset>(&model.variant()))
    return gemm_schedule(kp->for_shape(a.rows(), b.cols(), a.cols()), a, b, c, options);
  if (std::holds_alternative<EigenGemm>(model.variant())) return gemm_eigen(a, b, c, options);
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

Matrix gemm(const AccumulationModel& model, const Matrix& a, const Matrix& b, const GemmOptions& options) {
  return gemm(model, a, b, Matrix::Zero(a.rows(), b.cols()), options);
}

Matrix round_to_format(const Matrix& m, const Format& fmt, RoundingMode mode, std::uint64_t seed) {
  Matrix r(m.rows(), m.cols());
  Rounding rnd;
  rnd.mode = mode;
  for (Eigen::Index idx = 0; idx < m.size(); ++idx) {
    const double x = m.data()[idx];
    if (!std::isfinite(x)) {
      r.data()[idx] = x;
      continue;
    }
    if (mode == RoundingMode::stochastic)
      rnd.random_bits = counter_random(seed, 0, static_cast<std::uint64_t>(idx));
    Flags f = 0;
    r.data()[idx] = to_double(fmt, round_double(fmt, x, rnd, f));
  }
  return r;
}

}  // namespace rpsim::sim
