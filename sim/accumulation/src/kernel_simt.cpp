// cuBLAS's CUDA-core kernels (kernel_simt.hpp).
//
// Evidence: bitequiv (facebookexperimental/triton, bitequiv/cublas_match/
// kernels.py, its SIMT section), which reproduces cuBLAS's gemmSN_NN_kernel
// (cuBLASLt ALGO_ID 11), magma_sgemmEx_kernel (16), gemv2T/gemv2N_kernel (13)
// and dot_kernel + reduce_1Block_kernel<float, 128, 7> (14) bit for bit on
// GB200 / GB300 (sm_100); the facts below are theirs, the code ours. Not yet
// measured on an H100 or H200: which thin shapes take which kernel, and the
// thread counts, sub-blocks and lane layouts each instance uses, are owed to
// a GPU session (the recorded kernel names and cuBLASLt's ALGO_ID say the
// family; the numbers are fields of the schedule).
//
// Every kernel keeps one binary32 accumulator per thread and updates it with
// an FFMA. fp16 and bf16 products are exact in binary32, so fma(a, b, acc)
// and acc + a*b are the same bits for them and only the association order
// matters; binary32 inputs (SGEMM) round once per FFMA, as fma does.
#include "kernel_simt.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernel_fold.hpp"
#include "kernel_simt_orders.hpp"

namespace rpsim::sim {

namespace {

// One output's products, one binary32 lane.
struct Operands {
  using V = float;
  const double *a, *b;
  std::ptrdiff_t as, bs;
  long k0, k1;
  float ffma(long k, float acc) const {
    return std::fma(static_cast<float>(a[k * as]), static_cast<float>(b[k * bs]), acc);
  }
};

// X rounded up to a multiple of `to`.
Eigen::Index round_up(Eigen::Index x, Eigen::Index to) {
  return (x + to - 1) / to * to;
}

// gemm_simt on simt_avx512's blocks of outputs: A and B once in binary32
// (what the kernels multiply; a static_cast, as Operands::ffma does), padded
// with zeros to whole blocks; each block's chunk partials, then the fold per
// output as the scalar path does.
void gemm_simt_blocks(const KernelSchedule& s, const std::vector<KChunk>& chunks, const KernelFold& fold,
                      const Matrix& a, const Matrix& b, const Matrix& c, int threads,
                      const TensorScales& scales, Matrix& d) {
  using simt_avx512::kCols;
  using simt_avx512::kRows;
  const Eigen::Index m = round_up(a.rows(), kRows), n = round_up(b.cols(), kCols);
  Eigen::MatrixXf af = Eigen::MatrixXf::Zero(m, a.cols()), bf = Eigen::MatrixXf::Zero(b.rows(), n);
  af.topRows(a.rows()) = a.cast<float>();
  bf.leftCols(b.cols()) = b.cast<float>();
  const Eigen::Index row_blocks = m / kRows, blocks = row_blocks * (n / kCols);
  const auto per_block = static_cast<std::size_t>(kRows * kCols);
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
  {
    std::vector<float> out(chunks.size() * per_block);
    std::vector<float> scratch(simt_avx512::scratch_floats(s));
    std::vector<double> partials(static_cast<std::size_t>(fold.slices()));
#pragma omp for schedule(dynamic, 1)
    for (Eigen::Index blk = 0; blk < blocks; ++blk) {
      const Eigen::Index i0 = (blk % row_blocks) * kRows, j0 = (blk / row_blocks) * kCols;
      simt_avx512::block(s, chunks, af.data() + i0, m, bf.col(j0).data(), bf.rows(), out.data(),
                         scratch.data());
      for (Eigen::Index j = j0; j < std::min(j0 + kCols, b.cols()); ++j)
        for (Eigen::Index i = i0; i < std::min(i0 + kRows, a.rows()); ++i) {
          const auto lane = static_cast<std::size_t>((j - j0) * kRows + (i - i0));
          for (std::size_t q = 0; q < chunks.size(); ++q)
            partials[static_cast<std::size_t>(chunks[q].slice)] = out[q * per_block + lane];
          d(i, j) = fold.result(partials.data(), c(i, j), scales.at(scales.a, i), scales.at(scales.b, j));
        }
    }
  }
}

}  // namespace

Matrix gemm_simt(const KernelSchedule& s, const Matrix& a, const Matrix& b, const Matrix& c, int threads,
                 const TensorScales& scales) {
  const auto chunks = s.chunks(static_cast<int>(a.cols()));
  const KernelFold fold(s, chunks, scales.any());
  Matrix d(a.rows(), b.cols());
  // A block of outputs at once where the CPU has the vector kernel and A
  // fills its rows (each lane the scalar path's steps: same bits).
  if (a.rows() >= simt_avx512::kRows && simt_avx512::usable(s)) {
    gemm_simt_blocks(s, chunks, fold, a, b, c, threads, scales, d);
    return d;
  }
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
  {
    std::vector<double> partials(static_cast<std::size_t>(fold.slices()));
    std::vector<float> scratch(static_cast<std::size_t>(simt_scratch(s)));
#pragma omp for schedule(dynamic, 4)
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      for (Eigen::Index j = 0; j < b.cols(); ++j) {
        for (const KChunk& ch : chunks)
          partials[static_cast<std::size_t>(ch.slice)] = simt_orders::run(
              s, Operands{a.data() + i, b.col(j).data(), a.rows(), 1, ch.begin, ch.end}, scratch.data());
        d(i, j) = fold.result(partials.data(), c(i, j), scales.at(scales.a, i), scales.at(scales.b, j));
      }
  }
  return d;
}

}  // namespace rpsim::sim
