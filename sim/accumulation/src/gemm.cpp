// GEMM under an accumulation model. Tensor Core models and kernel schedules
// share one executor: A's rows and B's columns are decoded once, in the order
// the plan's steps take the products, then every output element runs the
// one step chain (tensor_core_chain.hpp) chunk by chunk, and the chunk
// results are folded as the schedule says (kernel_fold.hpp).
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/gemm_kernel.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "gemm_tile.hpp"
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

// Every column of B decoded in plan order, eight columns interleaved
// (gemm_tile.hpp); columns past N are zeros.
tc_detail::TiledB decode_tiles(const tc_detail::Finisher& fin, const tc_detail::ChainPlan& plan,
                               const Matrix& b) {
  using tc_detail::kTile;
  const std::size_t p = plan.order.size();
  tc_detail::TiledB t;
  t.tiles = static_cast<int>((b.cols() + kTile - 1) / kTile);
  t.value.assign(p * kTile * static_cast<std::size_t>(t.tiles), 0.0);
  t.exponent.assign(t.value.size(), fin.zero_exponent);
  std::vector<double> v(p);
  std::vector<int> e(p);
  for (Eigen::Index j = 0; j < b.cols(); ++j) {
    tc_detail::decode_in_plan_order(fin, plan, b.col(j).data(), 1, v.data(), e.data(), true);
    const std::size_t at = std::size_t(j / kTile) * p * kTile + std::size_t(j % kTile);
    for (std::size_t q = 0; q < p; ++q) {
      t.value[at + q * kTile] = v[q];
      t.exponent[at + q * kTile] = e[q];
    }
  }
  return t;
}

constexpr int kLanes = 4;
constexpr int kMaxLanes = 2 * tc_detail::kTile;  // two tiles interleaved

// What every output element's chains share.
struct Chains {
  const tc_detail::Finisher& fin;
  const tc_detail::ChainPlan& plan;
  const std::vector<KernelFold>& folds;
  const Matrix& c;
};

// Up to kMaxLanes elements (i, j0 + l) of D: chain(q, acc) runs chunk q's
// steps on acc[0..kMaxLanes), each chunk's chains run once and their results
// are folded under every fold of the group into d[f].
template <class Chain>
void fold_elements(const Chains& x, Eigen::Index i, Eigen::Index j0, int lanes, double* chunk_acc,
                   double* partials, std::vector<Matrix>& d, Chain&& chain) {
  const int chunks = x.plan.chunks();
  const bool c_first = x.folds.front().c_starts_chain();
  for (int q = 0; q < chunks; ++q) {
    double* acc = chunk_acc + q * kMaxLanes;
    for (int l = 0; l < kMaxLanes; ++l) acc[l] = q == 0 && c_first && l < lanes ? x.c(i, j0 + l) : 0.0;
    chain(q, acc);
  }
  for (std::size_t f = 0; f < x.folds.size(); ++f)
    for (int l = 0; l < lanes; ++l) {
      if (x.folds[f].plain()) {  // one chunk, nothing to fold
        d[f](i, j0 + l) = chunk_acc[l];
        continue;
      }
      for (int q = 0; q < chunks; ++q)
        x.folds[f].add_chunk(x.plan, q, chunk_acc[q * kMaxLanes + l], partials);
      d[f](i, j0 + l) = x.folds[f].result(partials, x.c(i, j0 + l));
    }
}

// Row i of D, kLanes elements at a time: each element a serial chain of
// steps, so interleaving independent chains hides their latency.
template <bool Checked>
void portable_row(const Chains& x, const double* av, const int* ae, const tc_detail::Decoded& bd,
                  Eigen::Index i, double* chunk_acc, double* partials, std::vector<Matrix>& d) {
  const std::size_t p = x.plan.order.size();
  const Eigen::Index n = x.c.cols();
  for (Eigen::Index j0 = 0; j0 < n; j0 += kLanes) {
    const int lanes = static_cast<int>(std::min<Eigen::Index>(kLanes, n - j0));
    const double* bv[kLanes];
    const int* be[kLanes];
    for (int l = 0; l < lanes; ++l) {
      bv[l] = bd.value.data() + static_cast<std::size_t>(j0 + l) * p;
      be[l] = bd.exponent.data() + static_cast<std::size_t>(j0 + l) * p;
    }
    fold_elements(x, i, j0, lanes, chunk_acc, partials, d, [&](int q, double* acc) {
      tc_detail::run_chain<kLanes, Checked>(x.fin, x.plan, x.plan.chunk_step[std::size_t(q)],
                                            x.plan.chunk_step[std::size_t(q) + 1], av, ae, bv, be, acc,
                                            lanes);
    });
  }
}

constexpr Eigen::Index kRowBlock = 16;

// The tile kernel over blocks of rows: a block's rows of A are decoded once,
// then taken tile by tile (a tile of B, eight columns, stays in cache for
// the block's rows).
void run_tiles(const Chains& x, const Matrix& a, const tc_detail::TiledB& bt, int threads,
               std::vector<Matrix>& d) {
  using tc_detail::kTile;
  const std::size_t p = x.plan.order.size();
  const Eigen::Index m = a.rows(), n = x.c.cols();
  const Eigen::Index blocks = (m + kRowBlock - 1) / kRowBlock;
  const auto& cs = x.plan.chunk_step;
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> av(p * kRowBlock), chunk_acc(static_cast<std::size_t>(kMaxLanes * x.plan.chunks()));
    std::vector<double> partials(static_cast<std::size_t>(x.folds.front().slices()));
    std::vector<int> ae(p * kRowBlock);
#pragma omp for schedule(dynamic, 1)
    for (Eigen::Index blk = 0; blk < blocks; ++blk) {
      const Eigen::Index i0 = blk * kRowBlock, rows = std::min(kRowBlock, m - i0);
      for (Eigen::Index r = 0; r < rows; ++r)
        tc_detail::decode_in_plan_order(x.fin, x.plan, a.data() + i0 + r, a.rows(), av.data() + r * p,
                                        ae.data() + r * p, false);
      for (int t = 0; t < bt.tiles; t += 2) {
        const int tiles = std::min(2, bt.tiles - t);
        const double* bv = bt.value.data() + std::size_t(t) * p * kTile;
        const int* be = bt.exponent.data() + std::size_t(t) * p * kTile;
        const int lanes = static_cast<int>(std::min<Eigen::Index>(kMaxLanes, n - Eigen::Index(t) * kTile));
        for (Eigen::Index r = 0; r < rows; ++r) {
          const double* ar = av.data() + r * p;
          const int* er = ae.data() + r * p;
          fold_elements(x, i0 + r, Eigen::Index(t) * kTile, lanes, chunk_acc.data(), partials.data(), d,
                        [&](int q, double* acc) {
                          tc_detail::run_chain_tiles(x.fin, x.plan, cs[std::size_t(q)],
                                                     cs[std::size_t(q) + 1], ar, er, bv, be, p * kTile, tiles,
                                                     acc);
                        });
        }
      }
    }
  }
}

// D under every schedule of a fold group (one chain per element, folded
// under each) for the block-FMA datapath, on A and B in the input format.
// The tile kernel takes finite operands on a CPU that runs it; every other
// case goes row by row through run_chain.
std::vector<Matrix> gemm_chains(const std::vector<KernelSchedule>& group, const Matrix& a, const Matrix& b,
                                const Matrix& c, const GemmOptions& options) {
  const KernelSchedule& s = group.front();
  const auto chunks = s.chunks(static_cast<int>(a.cols()));
  const tc_detail::Finisher fin(s.instruction);
  const auto plan = tc_detail::chain_plan(s.instruction, chunks, s.k_order == KOrder::decreasing);
  std::vector<KernelFold> folds;
  for (const auto& g : group) folds.emplace_back(g, chunks);
  const Chains x{fin, plan, folds, c};
  const std::size_t p = plan.order.size();
  const bool finite = a.allFinite() && b.allFinite();
  const int threads = options.threads > 0 ? options.threads : 1;
  const auto scratch = static_cast<std::size_t>(kMaxLanes * plan.chunks());
  std::vector<Matrix> d(group.size(), Matrix(a.rows(), b.cols()));
  if (finite && tc_detail::tile_kernel_usable(fin)) {
    run_tiles(x, a, decode_tiles(fin, plan, b), threads, d);
    return d;
  }
  const tc_detail::Decoded bd = decode_columns(fin, plan, b);
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> av(p), chunk_acc(scratch), partials(static_cast<std::size_t>(folds.front().slices()));
    std::vector<int> ae(p);
#pragma omp for schedule(dynamic, 4)
    for (Eigen::Index i = 0; i < a.rows(); ++i) {
      tc_detail::decode_in_plan_order(fin, plan, a.data() + i, a.rows(), av.data(), ae.data(), false);
      if (finite)
        portable_row<false>(x, av.data(), ae.data(), bd, i, chunk_acc.data(), partials.data(), d);
      else
        portable_row<true>(x, av.data(), ae.data(), bd, i, chunk_acc.data(), partials.data(), d);
    }
  }
  return d;
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
  return std::move(gemm_chains({s}, a, b, c, options).front());
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
  return gemm_chains(group, a, b, c, options);
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
