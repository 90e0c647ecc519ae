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

// gemm_row for a fold group: each element's chunk chains run once, their
// results folded under every schedule (the same add_chunk and result calls).
template <bool Checked>
void gemm_row_folds(const tc_detail::Finisher& fin, const tc_detail::ChainPlan& plan,
                    const std::vector<KernelFold>& folds, const double* av, const int* ae,
                    const tc_detail::Decoded& bd, const Matrix& c, Eigen::Index i, std::vector<Matrix>& d,
                    std::vector<double>& chunk_acc, std::vector<double>& partials) {
  const std::size_t p = plan.order.size();
  const Eigen::Index n = c.cols();
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
      for (int l = 0; l < lanes; ++l) acc[l] = q == 0 && folds[0].c_starts_chain() ? c(i, j0 + l) : 0.0;
      tc_detail::run_chain<kLanes, Checked>(fin, plan, plan.chunk_step[std::size_t(q)],
                                            plan.chunk_step[std::size_t(q) + 1], av, ae, bv, be, acc, lanes);
      for (int l = 0; l < lanes; ++l) chunk_acc[std::size_t(q * kLanes + l)] = acc[l];
    }
    for (std::size_t f = 0; f < folds.size(); ++f)
      for (int l = 0; l < lanes; ++l) {
        if (folds[f].plain()) {
          d[f](i, j0 + l) = chunk_acc[std::size_t(l)];
          continue;
        }
        for (int q = 0; q < chunks; ++q)
          folds[f].add_chunk(plan, q, chunk_acc[std::size_t(q * kLanes + l)], partials.data());
        d[f](i, j0 + l) = folds[f].result(partials.data(), c(i, j0 + l));
      }
  }
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

// The schedule with its fold fields (how chunk results are combined) set to
// one value.
std::string fold_group_key(KernelSchedule s) {
  s.promotion_rounding = RoundingMode::nearest_even;
  s.reduction = Reduction::sequential;
  s.reduction_format = formats::binary32();
  s.reduction_rounding = RoundingMode::nearest_even;
  s.output = s.instruction.output;
  s.output_rounding = RoundingMode::nearest_even;
  return AccumulationModel(s).spec();
}

std::vector<Matrix> gemm_fold_group(const std::vector<KernelSchedule>& group, const Matrix& a_in,
                                    const Matrix& b_in, const Matrix& c, const GemmOptions& options) {
  check_shapes(a_in, b_in, c);
  std::vector<Matrix> d;
  if (group.empty()) return d;
  const KernelSchedule& s = group.front();
  const int k = static_cast<int>(a_in.cols());
  const auto chunks = s.chunks(k);
  auto same_chunks = [&](const std::vector<KChunk>& x) {
    return std::equal(x.begin(), x.end(), chunks.begin(), chunks.end(), [](const KChunk& u, const KChunk& v) {
      return u.begin == v.begin && u.end == v.end && u.slice == v.slice;
    });
  };
  for (const auto& g : group)
    if (fold_group_key(g) != fold_group_key(s) || !same_chunks(g.chunks(k)))
      throw std::invalid_argument("gemm_fold_group: '" + AccumulationModel(g).spec() +
                                  "' runs other chains than '" + AccumulationModel(s).spec() + "'");
  if (s.instruction.datapath != Datapath::block_fma || s.instruction.scale_block > 0) {
    for (const auto& g : group) d.push_back(gemm_schedule(g, a_in, b_in, c, options));
    return d;
  }
  const Matrix a = s.stored == s.instruction.input ? a_in : converted(a_in, s);
  const Matrix b = s.stored == s.instruction.input ? b_in : converted(b_in, s);
  const tc_detail::Finisher fin(s.instruction);
  const auto plan = tc_detail::chain_plan(s.instruction, chunks, s.k_order == KOrder::decreasing);
  std::vector<KernelFold> folds;
  for (const auto& g : group) folds.emplace_back(g, chunks);
  const tc_detail::Decoded bd = decode_columns(fin, plan, b);
  const std::size_t p = plan.order.size();
  const bool finite = a.allFinite() && b.allFinite();
  d.assign(group.size(), Matrix(a.rows(), b.cols()));
#pragma omp parallel num_threads(options.threads > 0 ? options.threads : 1)
  {
    std::vector<double> av(p), chunk_acc(static_cast<std::size_t>(kLanes * plan.chunks()));
    std::vector<double> partials(static_cast<std::size_t>(folds.front().slices()));
    std::vector<int> ae(p);
#pragma omp for schedule(dynamic, 4)
    for (Eigen::Index i = 0; i < a.rows(); ++i) {
      tc_detail::decode_in_plan_order(fin, plan, a.data() + i, a.rows(), av.data(), ae.data(), false);
      if (finite)
        gemm_row_folds<false>(fin, plan, folds, av.data(), ae.data(), bd, c, i, d, chunk_acc, partials);
      else
        gemm_row_folds<true>(fin, plan, folds, av.data(), ae.data(), bd, c, i, d, chunk_acc, partials);
    }
  }
  return d;
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
