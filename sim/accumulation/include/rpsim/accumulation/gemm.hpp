// GEMM D = A*B + C under an accumulation model, per output element over K.
// Matrices are Eigen matrices of doubles holding exactly representable values
// of the model's input format (A, B) and output format (C); round_to_format
// prepares them.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rpsim/accumulation/accumulation.hpp"
#include "rpsim/formats/format.hpp"
#include "rpsim/formats/rounding.hpp"

namespace rpsim::sim {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic>;

struct GemmOptions {
  int threads = 1;  // OpenMP threads over output rows; results do not depend on it
};

// D = A*B + C. Throws std::invalid_argument naming the mismatched dimensions.
// Element (i, j) uses stream i*N + j for stochastic rounding.
Matrix gemm(const AccumulationModel& model, const Matrix& a, const Matrix& b, const Matrix& c,
            const GemmOptions& options = {});
// D = A*B (C = 0).
Matrix gemm(const AccumulationModel& model, const Matrix& a, const Matrix& b,
            const GemmOptions& options = {});

// Scales of a scaled GEMM. Block scales (tcgen05.mma.block_scale,
// mma.block_scale; OCP MX, NVFP4): values of the model's scale format (a
// ue4m3 scale's sign is ignored, as the instruction does), one per
// scale_block elements along K: SFA is M x K/block (along A's rows), SFB
// K/block x N (along B's columns). torch._scaled_mm-style binary32 scales:
// scale_a 1x1 (per tensor) or Mx1 (per row), scale_b 1x1 or 1xN (per
// column); D = fl(fl32(scale_a_i * scale_b_j) * (A B) + C), A B the model's
// product from zero, every step a binary32 operation (cuBLASLt's documented
// D = scale_a scale_b (A B) + C; its rounding steps are unmeasured).
struct GemmScales {
  std::optional<Matrix> sfa, sfb, scale_a, scale_b;
  bool empty() const { return !sfa && !sfb && !scale_a && !scale_b; }
};

// Checks the scales against the model and the shape M x K x N: SFA and SFB
// both or neither, only for a block-scaled model (and it needs them), K a
// multiple of the block, the shapes, values of the scale format, finite
// positive binary32 per-tensor scales. Throws std::invalid_argument naming
// the array ("SFA: expected 4x2 (M x K/32), given 4x3").
void check_gemm_scales(const AccumulationModel& model, Eigen::Index m, Eigen::Index k, Eigen::Index n,
                       const GemmScales& scales);

// D = A*B + C with scales (gemm above when `scales` is empty). Block scales
// go through the instruction model itself (tensor_core_dot_other: a chain of
// instructions, C fed forward), element by element.
Matrix gemm(const AccumulationModel& model, const Matrix& a, const Matrix& b, const Matrix& c,
            const GemmScales& scales, const GemmOptions& options = {});

// FP8 block scaling's GEMM (DeepSeek-V3; Transformer Engine's
// Float8BlockScaling on cuBLAS's blockwise FP8 GEMM): A and B hold the FP8
// elements; `sa` (M x T) and `sb` (T x N) the binary32 dequantisation scales
// (scale_inv) of each 128-long k tile t (A's 1x128 blocks along its rows, or
// its 128x128 tiles with the tile's scale repeated over the tile's rows; B's
// along its columns). Each tile's product P_t = A_t B_t is the model's, from
// zero; the P_t are folded into a binary32 accumulator y (from +0) in tile
// order with one fused multiply-add each, in the order TE's cuBLAS reference
// (tests/pytorch/references/blockwise_fp8_gemm_reference.py) gives:
//   A 1D (1x128), B 1D or 2D:  y = fma(fl32(P_t * sa), sb, y)
//   A 2D, B 1D:                y = fma(fl32(P_t * sb), sa, y)
//   A 2D, B 2D:                y = fma(P_t, fl32(sa * sb), y)
// Then y is converted to `output`, and C (when given) is added after that
// conversion, in binary32 and rounded to `output` again (cuBLAS converts
// before it accumulates C). Throws std::invalid_argument naming a shape.
struct BlockwiseScales {
  Matrix sa, sb;
  bool a_2d = false, b_2d = false;  // 128x128 tiles rather than 1x128 blocks
  int tile_k = 128;
};
Matrix gemm_blockwise(const AccumulationModel& model, const Matrix& a, const Matrix& b,
                      const BlockwiseScales& s, const Format& output, const Matrix* c = nullptr,
                      const GemmOptions& options = {});

// D under each kernel schedule of `group`, schedules that run the same chunk
// chains (instruction, input conversion, chunks, K order, C placement) and
// differ only in how the chunk results are folded (promotion and reduction
// rounding, reduction order and format, output format and rounding): each
// chain runs once for the whole group (gemm-check --infer's variations).
// The same bits as gemm() under each. Throws std::invalid_argument naming a
// schedule whose chains differ from the first's.
// Schedules with the same key run the same chains: a fold group.
std::string fold_group_key(KernelSchedule s);
std::vector<Matrix> gemm_fold_group(const std::vector<KernelSchedule>& group, const Matrix& a,
                                    const Matrix& b, const Matrix& c, const GemmOptions& options = {});

// Every element rounded to `fmt` (NaN/inf kept as IEEE doubles). Stochastic
// rounding draws counter_random(seed, 0, linear index).
Matrix round_to_format(const Matrix& m, const Format& fmt, RoundingMode mode = RoundingMode::nearest_even,
                       std::uint64_t seed = 0);

}  // namespace rpsim::sim
