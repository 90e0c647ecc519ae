// Block-scaled GEMMs in training on a block-scaled Tensor Core instruction
// (tcgen05.mma.block_scale kind::mxf8f6f4 / mxf4nvf4 on B200,
// mma.block_scale on sm_120): when a block-scaled policy's op rule names
// such an instruction as its accumulation, the quantised operands' block
// scales go into the GEMM as SFA / SFB (gemm.hpp GemmScales), as the
// hardware takes them, instead of the elements being multiplied by their
// scales before a GEMM that knows nothing of them.
#pragma once

#include <string>

#include "rpsim/accumulation/tensor_core.hpp"
#include "rpsim/formats/recipe.hpp"
#include "rpsim/train/layers/fp8.hpp"
#include "rpsim/train/policy.hpp"

namespace rpsim::sim::train {

// A block-quantised GEMM operand: block_quantize_recipe's values (each
// element times its block's decoding scale), each entry's block scale, the
// element format, and for FP8 block scaling (binary32 scales, folded per k
// tile by the blockwise GEMM) whether the blocks are 2-D tiles.
struct BlockOperand {
  Matrix values, scales;
  const Format* format = nullptr;
  bool blockwise = false;  // FP8 block scaling: binary32 scale_inv per 1x128 block or 128x128 tile
  bool tiles = false;      // 2-D tiles (blockwise: the fold order of gemm_blockwise)
  int block = 0;           // blockwise: entries per block along K (the GEMM's k tile)
  // NVFP4: the binary32 amax of the tensor as quantised (TE's global amax),
  // which the GEMM's alpha reads (gemm_epilogue.hpp nvfp4_alpha).
  double tensor_amax = 0;
};
// `with_scales`: keep each entry's block scale (block_matmul reads them only
// where block_scales_read says; a per-entry binary64 matrix written for
// nothing was a tenth of an NVFP4 operand's quantisation).
BlockOperand block_operand(const Matrix& x, const Format& f, const Fp8Recipe& recipe,
                           const BlockLayout& layout, Fp8Stats* stats = nullptr,
                           double* tensor_scale = nullptr, bool with_scales = true);
// Whether block_matmul under `model` reads its operands' scales: FP8 block
// scaling (the blockwise GEMM folds them per k tile) or a block-scaled
// instruction (sfa, sfb). Otherwise it multiplies the values as they are.
bool block_scales_read(const Fp8Recipe& recipe, const AccumulationModel& model);

// The formats recipe (recipe.hpp) a block-scaled policy's recipe runs on
// one group of `block` entries: torchao-mx with fp8.scale_rule (floor: the
// OCP rule), te-nvfp4 with fp8.nvfp4_formula, te-fp8-block with
// fp8.pow2_scales. Throws std::invalid_argument for an element format the
// recipe has no row for.
QuantSpec block_spec(const Fp8Recipe& recipe, const Format& f, std::size_t block);

// The quantiser a block-scaled policy runs on output gradients: block_spec of
// its linear rule's backward_compute format and its block, 1-D blocks (the
// what-if counts of `rpsim grads --recipes` and rpsim.recipe_effect). Throws
// ConfigError naming a policy that does not block-scale.
QuantSpec gradient_spec(const PrecisionPolicy& p);

// Block-scaled quantisation of a GEMM input under any block-scaled recipe
// (mx, nvfp4, blockwise), the trainer's one block quantiser: the groups of
// `layout` (layers/fp8.hpp) each quantised by block_spec's recipe row. Returns
// each element times its block's decoding scale (what a block-scaled MMA
// multiplies); *tensor_scale, when given, gets NVFP4's per-tensor encoding
// scale (1 otherwise), which the GEMM epilogue divides by; `stats` takes the
// amax, the range of the block scales over blocks with a nonzero finite scale
// and the counts, added to what it holds; `scales` each entry's block scale;
// *tensor_amax the tensor's amax (NaN when an entry is, as TE's torch.max).
Matrix block_quantize_recipe(const Matrix& x, const Format& f, const Fp8Recipe& recipe,
                             const BlockLayout& layout, Fp8Stats* stats = nullptr,
                             double* tensor_scale = nullptr, Matrix* scales = nullptr,
                             double* tensor_amax = nullptr);

// For the current thread until the end of the scope, block_quantize_recipe
// quantises every recipe element by element (recipe::quantize_group_block),
// its paths by lines (MX with FP8 elements, NVFP4) off: what the tests
// compare those paths with.
class ScopedElementwiseBlockQuantiser {
 public:
  ScopedElementwiseBlockQuantiser();
  ~ScopedElementwiseBlockQuantiser();
  ScopedElementwiseBlockQuantiser(const ScopedElementwiseBlockQuantiser&) = delete;
  ScopedElementwiseBlockQuantiser& operator=(const ScopedElementwiseBlockQuantiser&) = delete;

 private:
  bool saved_;
};

// TE's weight-gradient Hadamard transform as hadamard_rows takes it (n = 16):
// T = (diag(s) H16)^T / 4 with TE's fixed sign vector s (reference_nvfp4.py
// get_wgrad_sign_vector), so T applied to a column of 16 is TE's x_mat @ H / 4
// on that row of x^T.
Matrix te_hadamard_transform(int n);

// The block-scaled Tensor Core instruction `model` is, or null.
const TensorCoreModel* block_instruction(const AccumulationModel& model);

// The instruction of `m`'s preset (GPU, instruction, output, scale format
// and block) for A in `a` and B in `b`: `m` itself when those are its
// operands (its field overrides kept), else the preset's row for the pair
// (a backward GEMM's e5m2 x e4m3). `scaled` false: that GPU's unscaled
// instruction for the pair (NVFP4's layers kept in bf16). Throws
// std::invalid_argument when the GPU has no such instruction.
TensorCoreModel instruction_for(const TensorCoreModel& m, const Format& a, const Format& b,
                                bool scaled = true);

// A x B of two block-quantised operands, blocks along K. Under a
// block-scaled instruction the elements go in with their scales as SFA
// (M x K/block) and SFB (K/block x N); a K that is not a multiple of the
// block is padded with zero elements (a tile load's zero fill). Under any
// other model the values are multiplied as they are (tensor.hpp matmul).
Matrix block_matmul(const BlockOperand& a, const BlockOperand& b, const AccumulationModel& model,
                    RandomStream random);

// The model a linear layer kept in high precision (bf16 inputs) runs: the
// unscaled instruction of the same GPU for a block-scaled `model`, else
// `model`.
AccumulationModel high_precision_model(const AccumulationModel& model, const Format& input);

// Throws ConfigError naming `path`.ops.OP.accumulation when a block-scaled
// policy's op names a block-scaled instruction that disagrees with its
// recipe: scale format (mx: ue8m0, nvfp4: ue4m3), block (fp8.block_size
// against the instruction's scale_block), or an operand pair of the three
// GEMMs (forward, weight and input gradient) the GPU has no instruction for.
void check_block_instructions(const PrecisionPolicy& p, const std::string& path);

// The same checks of one op rule, the message naming `where` (rpsim.torch's
// emulate(accumulation=...) names its argument). A rule that follows its
// inputs, or does not block-scale them, cannot take a block-scaled
// instruction.
void check_block_instruction(const PrecisionPolicy& p, const OpRule& rule, const std::string& where);

}  // namespace rpsim::sim::train
