// GEMM under an accumulation model. The Tensor Core model has its own path:
// A's rows and B's columns are decoded once into (value, alignment exponent)
// arrays, then every output element runs the block-FMA kernel over K in steps.
#include "rpsim/accumulation/gemm.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "rpsim/formats/random.hpp"
#include "tensor_core_finish.hpp"
#include "tensor_core_kernel.hpp"

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

bool all_finite(const Matrix& m) {
  return m.allFinite();
}

// Decoded operands, K-contiguous, structure of arrays so the kernel loops vectorise.
struct DecodedPanel {
  std::vector<double> value;
  std::vector<int> exponent;
};

Matrix gemm_tensor_core(const TensorCoreModel& model, const Matrix& a, const Matrix& b, const Matrix& c,
                        const GemmOptions& options) {
  const Eigen::Index m = a.rows(), n = b.cols(), k = a.cols();
  Matrix d(m, n);
  if (!all_finite(a) || !all_finite(b) || !all_finite(c)) {
    // Non-finite operands: the per-element model handles IEEE special cases.
    std::vector<double> row(static_cast<std::size_t>(k));
    for (Eigen::Index i = 0; i < m; ++i) {
      for (Eigen::Index t = 0; t < k; ++t) row[static_cast<std::size_t>(t)] = a(i, t);
      for (Eigen::Index j = 0; j < n; ++j)
        d(i, j) = tensor_core_dot(
            model, row, std::span<const double>(b.col(j).data(), static_cast<std::size_t>(k)), c(i, j));
    }
    return d;
  }
  const tc_detail::Finisher fin(model);
  const std::size_t kk = static_cast<std::size_t>(k);
  auto decode = [&](double x, double& v, int& e) {
    const auto o = tc_detail::decode_operand(x, fin.in_emin, fin.in_min_normal, model.subnormal_inputs);
    v = o.value;
    e = o.exponent;
  };
  // K in the order the steps take the products (step_interleave), so that
  // every step is a contiguous run of the decoded arrays.
  const auto sched = tc_detail::step_schedule(model, static_cast<int>(k));
  const bool after = model.c_join != CJoin::aligned_with_products;
  DecodedPanel bp;  // all columns of B, column j at [j*K, (j+1)*K)
  bp.value.resize(kk * static_cast<std::size_t>(n));
  bp.exponent.resize(bp.value.size());
  for (Eigen::Index j = 0; j < n; ++j)
    for (std::size_t t = 0; t < kk; ++t) {
      const std::size_t idx = static_cast<std::size_t>(j) * kk + t;
      decode(b(sched.order[t], j), bp.value[idx], bp.exponent[idx]);
    }
  const int steps = static_cast<int>(sched.begin.size()) - 1;
  const int frac = model.fraction_bits;
  const int floor = model.alignment_exponent_floor;

#pragma omp parallel for schedule(dynamic, 4) num_threads(options.threads > 0 ? options.threads : 1)
  for (Eigen::Index i = 0; i < m; ++i) {
    std::vector<double> av(kk);
    std::vector<int> ae(kk);
    for (std::size_t t = 0; t < kk; ++t) decode(a(i, sched.order[t]), av[t], ae[t]);
    // Four output elements at a time: each one is a serial chain of steps (the
    // result of a step is C of the next), so interleaving independent chains
    // hides their latency.
    constexpr int kLanes = 4;
    for (Eigen::Index j0 = 0; j0 < n; j0 += kLanes) {
      const int lanes = static_cast<int>(std::min<Eigen::Index>(kLanes, n - j0));
      const double* bv[kLanes];
      const int* be[kLanes];
      double acc[kLanes], held[kLanes];
      bool all_negative_zero[kLanes];
      for (int l = 0; l < lanes; ++l) {
        bv[l] = bp.value.data() + static_cast<std::size_t>(j0 + l) * kk;
        be[l] = bp.exponent.data() + static_cast<std::size_t>(j0 + l) * kk;
        acc[l] = c(i, j0 + l);
        all_negative_zero[l] = std::signbit(acc[l]);
      }
      for (int s = 0; s < steps; ++s) {
        const auto base = static_cast<std::size_t>(sched.begin[static_cast<std::size_t>(s)]);
        const int cnt = sched.begin[static_cast<std::size_t>(s) + 1] - static_cast<int>(base);
        if (after && sched.first[static_cast<std::size_t>(s)])
          for (int l = 0; l < lanes; ++l) {
            // The instruction's steps start from -0 (the identity of IEEE
            // addition); C is added after them.
            held[l] = acc[l];
            acc[l] = -0.0;
            all_negative_zero[l] = true;
          }
        const double* pav = av.data() + base;
        const int* pae = ae.data() + base;
        for (int l = 0; l < lanes; ++l) {
          const double* pbv = bv[l] + base;
          const int* pbe = be[l] + base;
          int emax = 0;
          const double sum_d = tc_detail::aligned_sum_arrays(
              cnt, pav, pae, pbv, pbe, acc[l], tc_detail::c_exponent(acc[l]), frac, floor, emax);
          const auto sum = static_cast<std::int64_t>(sum_d);
          if (sum != 0) {
            acc[l] = fin.finish(sum, emax - frac);
            all_negative_zero[l] = false;
          } else {
            // Exact zero: -0 only if every term is -0 (IEEE 754 clause 6.3).
            bool neg = all_negative_zero[l] && emax < tc_detail::kAllZeroThreshold;
            for (int q = 0; q < cnt && neg; ++q) neg = std::signbit(pav[q]) != std::signbit(pbv[q]);
            acc[l] = neg ? -0.0 : 0.0;
            all_negative_zero[l] = neg;
          }
        }
        if (after && sched.last[static_cast<std::size_t>(s)])
          for (int l = 0; l < lanes; ++l) {
            acc[l] = fin.add_after(acc[l], held[l]);
            all_negative_zero[l] = acc[l] == 0 && std::signbit(acc[l]);
          }
      }
      for (int l = 0; l < lanes; ++l) d(i, j0 + l) = acc[l];
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
    return gemm_tensor_core(*tc, a, b, c, options);
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
