// Which kernel runs the block-FMA Tensor Core GEMM (gemm(), gemm_fold_group)
// and cuBLAS's CUDA-core orders (kernel_schedule.hpp SimtOrder): the widest
// the CPU runs (AVX-512: eight output columns per vector, or 16 x 4 outputs
// for the CUDA-core orders, chosen at run time) or the portable scalar chain.
// Both give the same bits (tests/sim/accumulation/test_gemm_kernel.cpp,
// test_kernel_simt.cpp); the switch is process-wide, for tests and
// benchmarks that compare the two.
#pragma once

#include <functional>
#include <vector>

#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/formats/array.hpp"

namespace rpsim::sim {

// best or avx512: the AVX-512 kernel where the CPU has it; portable (or
// avx2, which has no kernel of its own here): the scalar chain.
void set_gemm_isa(ArrayIsa isa);
// The kernel gemm() runs now for a model it can vectorise: "avx512" or "portable".
const char* gemm_kernel_isa();

// Rows of D in blocks of 4, then doubling up to 32: after each block
// [r0, r0 + len), done(r0, len, d) sees the results (rows before r0 + len
// filled) and says whether to go on.
constexpr Eigen::Index kFirstRowBlock = 4, kLastRowBlock = 32;
using RowBlockDone = std::function<bool(Eigen::Index r0, Eigen::Index len, const std::vector<Matrix>& d)>;

// gemm_fold_group block by block, stopping when `done` says so (rows after
// that are left unset): operands converted and decoded once for all blocks
// (gemm-check --infer's whole-dump checks, which stop at a block with a
// miss). The same bits as gemm_fold_group on every row computed.
std::vector<Matrix> gemm_fold_group_blocks(const std::vector<KernelSchedule>& group, const Matrix& a,
                                           const Matrix& b, const Matrix& c, const GemmOptions& options,
                                           const RowBlockDone& done);

}  // namespace rpsim::sim
