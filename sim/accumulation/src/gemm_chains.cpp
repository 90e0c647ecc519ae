// The block-FMA GEMM executor (gemm_chains.hpp).
#include "gemm_chains.hpp"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "gemm_tile.hpp"
#include "kernel_fold.hpp"
#include "tensor_core_chain.hpp"

namespace rpsim::sim {

namespace {

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
constexpr int kTilesAtOnce = 4;  // tiles whose chains run interleaved
constexpr int kMaxLanes = kTilesAtOnce * tc_detail::kTile;

// What every output element's chains share.
struct Chains {
  const tc_detail::Finisher& fin;
  const tc_detail::ChainPlan& plan;
  const std::vector<KernelFold>& folds;
  const Matrix& c;
  const TensorScales& scales;
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
      d[f](i, j0 + l) = x.folds[f].result(partials, x.c(i, j0 + l), x.scales.at(x.scales.a, i),
                                          x.scales.at(x.scales.b, j0 + l));
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
void run_tiles(const Chains& x, const Matrix& a, const tc_detail::TiledB& bt, int threads, Eigen::Index r0,
               Eigen::Index r1, std::vector<Matrix>& d) {
  using tc_detail::kTile;
  const std::size_t p = x.plan.order.size();
  const Eigen::Index n = x.c.cols();
  const Eigen::Index blocks = (r1 - r0 + kRowBlock - 1) / kRowBlock;
  const auto& cs = x.plan.chunk_step;
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> av(p * kRowBlock), chunk_acc(static_cast<std::size_t>(kMaxLanes * x.plan.chunks()));
    std::vector<double> partials(static_cast<std::size_t>(x.folds.front().slices()));
    std::vector<int> ae(p * kRowBlock);
#pragma omp for schedule(dynamic, 1)
    for (Eigen::Index blk = 0; blk < blocks; ++blk) {
      const Eigen::Index i0 = r0 + blk * kRowBlock, rows = std::min(kRowBlock, r1 - i0);
      for (Eigen::Index r = 0; r < rows; ++r)
        tc_detail::decode_in_plan_order(x.fin, x.plan, a.data() + i0 + r, a.rows(), av.data() + r * p,
                                        ae.data() + r * p, false);
      for (int t = 0; t < bt.tiles; t += kTilesAtOnce) {
        const int tiles = std::min(kTilesAtOnce, bt.tiles - t);
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

// Rows [r0, r1) of D through the portable chain (run_chain), row by row.
void run_rows(const Chains& x, const Matrix& a, const tc_detail::Decoded& bd, bool finite, int threads,
              Eigen::Index r0, Eigen::Index r1, std::vector<Matrix>& d) {
  const std::size_t p = x.plan.order.size();
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> av(p), chunk_acc(static_cast<std::size_t>(kMaxLanes * x.plan.chunks()));
    std::vector<double> partials(static_cast<std::size_t>(x.folds.front().slices()));
    std::vector<int> ae(p);
#pragma omp for schedule(dynamic, 4)
    for (Eigen::Index i = r0; i < r1; ++i) {
      tc_detail::decode_in_plan_order(x.fin, x.plan, a.data() + i, a.rows(), av.data(), ae.data(), false);
      if (finite)
        portable_row<false>(x, av.data(), ae.data(), bd, i, chunk_acc.data(), partials.data(), d);
      else
        portable_row<true>(x, av.data(), ae.data(), bd, i, chunk_acc.data(), partials.data(), d);
    }
  }
}

}  // namespace

std::vector<Matrix> gemm_chains(const std::vector<KernelSchedule>& group, const Matrix& a, const Matrix& b,
                                const Matrix& c, const GemmOptions& options, const RowBlockDone* done,
                                const TensorScales& scales) {
  const KernelSchedule& s = group.front();
  const auto chunks = s.chunks(static_cast<int>(a.cols()));
  const tc_detail::Finisher fin(s.instruction);
  const auto plan = tc_detail::chain_plan(s.instruction, chunks, s.k_order == KOrder::decreasing);
  std::vector<KernelFold> folds;
  for (const auto& g : group) folds.emplace_back(g, chunks, scales.any());
  const Chains x{fin, plan, folds, c, scales};
  const bool finite = a.allFinite() && b.allFinite();
  const int threads = options.threads > 0 ? options.threads : 1;
  const bool tiles = finite && tc_detail::tile_kernel_usable(fin);
  tc_detail::TiledB bt;
  tc_detail::Decoded bd;
  if (tiles)
    bt = decode_tiles(fin, plan, b);
  else
    bd = decode_columns(fin, plan, b);
  std::vector<Matrix> d(group.size(), Matrix(a.rows(), b.cols()));
  const Eigen::Index m = a.rows();
  Eigen::Index block = done ? kFirstRowBlock : m;
  for (Eigen::Index r0 = 0; r0 < m; r0 += block, block = std::min(2 * block, kLastRowBlock)) {
    const Eigen::Index r1 = std::min(m, r0 + block);
    if (tiles)
      run_tiles(x, a, bt, threads, r0, r1, d);
    else
      run_rows(x, a, bd, finite, threads, r0, r1, d);
    if (done && !(*done)(r0, r1 - r0, d)) break;
  }
  return d;
}

}  // namespace rpsim::sim
