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

// D under every schedule of a fold group whose instruction is a block FMA
// without block scales, on A and B already in the instruction's input
// format. With `done`, the rows go in blocks (gemm_kernel.hpp) and stop
// when it returns false; without, all rows at once.
std::vector<Matrix> gemm_chains(const std::vector<KernelSchedule>& group, const Matrix& a, const Matrix& b,
                                const Matrix& c, const GemmOptions& options,
                                const RowBlockDone* done = nullptr);

}  // namespace rpsim::sim
