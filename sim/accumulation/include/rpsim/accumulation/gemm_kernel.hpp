// Which kernel runs the block-FMA Tensor Core GEMM (gemm(), gemm_fold_group):
// the widest the CPU runs (AVX-512: eight output columns per vector, chosen
// at run time) or the portable scalar chain. Both give the same bits
// (tests/sim/accumulation/test_gemm_kernel.cpp); the switch is process-wide,
// for tests and benchmarks that compare the two.
#pragma once

#include "rpsim/formats/array.hpp"

namespace rpsim::sim {

// best or avx512: the AVX-512 kernel where the CPU has it; portable (or
// avx2, which has no kernel of its own here): the scalar chain.
void set_gemm_isa(ArrayIsa isa);
// The kernel gemm() runs now for a model it can vectorise: "avx512" or "portable".
const char* gemm_kernel_isa();

}  // namespace rpsim::sim
