// The block-FMA GEMM executor shared by gemm(), gemm_fold_group and
// gemm_fold_group_blocks: A's rows and B's columns are decoded once, in the
// order the plan's steps take the products, then every output element runs
// the one step chain (tensor_core_chain.hpp; eight or sixteen columns at a
// time through the AVX-512 tile kernel, gemm_tile.hpp, where the CPU has it)
// chunk by chunk, and the chunk results are folded under each schedule of
// the group (kernel_fold.hpp). Internal to sim/accumulation.
#pragma once

#include <vector>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/gemm_kernel.hpp"

namespace rpsim::sim {

// The torch._scaled_mm scales of a GEMM (gemm.hpp GemmScales: scale_a 1x1 or
// Mx1, scale_b 1x1 or 1xN; either may be null: 1), applied by each
// schedule's scale_epilogue (kernel_fold.cpp).
struct TensorScales {
  const Matrix *a = nullptr, *b = nullptr;
  bool any() const { return a || b; }
  double at(const Matrix* s, Eigen::Index x) const {
    return !s ? 1.0 : s->size() == 1 ? s->data()[0] : s->data()[x];
  }
};

// D under every schedule of a fold group whose instruction is a block FMA
// without block scales, on A and B already in the instruction's input
// format. With `done`, the rows go in blocks (gemm_kernel.hpp) and stop
// when it returns false; without, all rows at once.
std::vector<Matrix> gemm_chains(const std::vector<KernelSchedule>& group, const Matrix& a, const Matrix& b,
                                const Matrix& c, const GemmOptions& options,
                                const RowBlockDone* done = nullptr, const TensorScales& scales = {});

}  // namespace rpsim::sim
