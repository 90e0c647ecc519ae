// Block-scaled GEMMs on a block-scaled Tensor Core instruction
// (block_gemm.hpp).
#include "rpsim/train/layers/block_gemm.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <cmath>
#include <stdexcept>

#include "../parallel_work.hpp"
#include "rpsim/accumulation/gemm.hpp"
#include "rpsim/accumulation/tensor_core_presets.hpp"
#include "rpsim/train/config_error.hpp"

namespace rpsim::sim::train {

BlockOperand block_operand(const Matrix& x, const Format& f, const Fp8Recipe& recipe,
                           const BlockLayout& layout, Fp8Stats* stats, double* tensor_scale,
                           bool with_scales) {
  BlockOperand o;
  o.values = block_quantize_recipe(x, f, recipe, layout, stats, tensor_scale,
                                   with_scales ? &o.scales : nullptr, &o.tensor_amax);
  o.format = &f;
  o.blockwise = recipe.scaling == Fp8Scaling::blockwise;
  o.tiles = layout.tiles;
  o.block = recipe.block_size;
  return o;
}

const TensorCoreModel* block_instruction(const AccumulationModel& model) {
  const TensorCoreModel* tc = model.bare_instruction();
  return tc && tc->scale_block > 0 ? tc : nullptr;
}

bool block_scales_read(const Fp8Recipe& recipe, const AccumulationModel& model) {
  return recipe.scaling == Fp8Scaling::blockwise || block_instruction(model) != nullptr;
}

TensorCoreModel instruction_for(const TensorCoreModel& m, const Format& a, const Format& b, bool scaled) {
  if (scaled && a == m.input && b == m.b_input()) return m;
  if (m.preset.empty())
    throw std::invalid_argument(
        fmt::format("'{}' is not a preset: it has no instruction for {} x {}", m.name, a.name, b.name));
  return tensor_core_preset(m.preset, a, m.output, m.instruction, b, scaled ? &*m.scale : nullptr,
                            scaled ? m.scale_block : 0);
}

namespace {

// The block-scale format's PTX name (E8M0 powers of two, or E4M3 read
// without its sign).
const char* scale_name(const Format& f) {
  return f.exp_bits == 8 && f.man_bits == 0 ? "ue8m0" : "ue4m3";
}

// An operand made without its scales (block_operand's with_scales) where a
// GEMM needs them: a caller's mistake, not an input's.
void check_scales(const BlockOperand& o) {
  if (o.scales.rows() != o.values.rows() || o.scales.cols() != o.values.cols())
    throw std::logic_error("block_matmul: a block operand made without its scales (block_scales_read)");
}

// The elements of `o` (values over their block scales; a zero scale, an
// all-zero NVFP4 block, holds zeros) with K padded to `k`: along columns
// for A (`k_cols`), along rows for B.
Matrix elements(const BlockOperand& o, Eigen::Index k, bool k_cols) {
  check_scales(o);
  Matrix e = k_cols ? Matrix::Zero(o.values.rows(), k) : Matrix::Zero(k, o.values.cols());
  for (Eigen::Index i = 0; i < o.values.rows(); ++i)
    for (Eigen::Index j = 0; j < o.values.cols(); ++j) {
      const double s = o.scales(i, j);
      e(i, j) = s == 0 ? 0.0 : o.values(i, j) / s;  // exact: values are element * scale
    }
  return e;
}

// One scale per block along K: the block's first entry's (every entry of a
// 1D block, or of a 2D tile's column, shares it).
Matrix block_scales(const BlockOperand& o, int block, Eigen::Index blocks, bool k_cols) {
  check_scales(o);
  Matrix s = k_cols ? Matrix(o.scales.rows(), blocks) : Matrix(blocks, o.scales.cols());
  for (Eigen::Index i = 0; i < s.rows(); ++i)
    for (Eigen::Index j = 0; j < s.cols(); ++j)
      s(i, j) = k_cols ? o.scales(i, j * block) : o.scales(i * block, j);
  return s;
}

}  // namespace

namespace {

// FP8 block scaling: the elements and their binary32 scales per 128-long k
// tile through sim's blockwise GEMM (cuBLAS's fold order), in binary32.
Matrix blockwise_matmul(const BlockOperand& a, const BlockOperand& b, const AccumulationModel& model) {
  if (a.values.cols() != b.values.rows())
    throw std::invalid_argument(
        fmt::format("matmul: inner dimensions differ ({} vs {})", a.values.cols(), b.values.rows()));
  if (!a.blockwise || !b.blockwise || a.block != b.block || a.block < 1)
    throw std::invalid_argument(
        fmt::format("blockwise matmul: both operands need FP8 block scales of one block "
                    "size (given {} and {})",
                    a.block, b.block));
  const int kTile = a.block;
  const Eigen::Index k = a.values.cols(), tiles = (k + kTile - 1) / kTile;
  BlockwiseScales s;
  s.sa = k ? block_scales(a, kTile, tiles, true) : Matrix(a.values.rows(), 0);
  s.sb = k ? block_scales(b, kTile, tiles, false) : Matrix(0, b.values.cols());
  s.a_2d = a.tiles;
  s.b_2d = b.tiles;
  s.tile_k = kTile;
  return gemm_blockwise(model, elements(a, k, true), elements(b, k, false), s, formats::binary32(), nullptr,
                        GemmOptions{omp_get_max_threads()});
}

}  // namespace

Matrix block_matmul(const BlockOperand& a, const BlockOperand& b, const AccumulationModel& model,
                    RandomStream random) {
  if (a.blockwise || b.blockwise) return blockwise_matmul(a, b, model);
  const TensorCoreModel* tc = block_instruction(model);
  if (!tc) return matmul(a.values, b.values, model, random);
  if (a.values.cols() != b.values.rows())
    throw std::invalid_argument(
        fmt::format("matmul: inner dimensions differ ({} vs {})", a.values.cols(), b.values.rows()));
  const TensorCoreModel m = instruction_for(*tc, *a.format, *b.format);
  const int block = m.scale_block;
  const Eigen::Index k = a.values.cols(), blocks = (k + block - 1) / block;
  GemmScales s;
  s.sfa = block_scales(a, block, blocks, true);
  s.sfb = block_scales(b, block, blocks, false);
  const Matrix zero = Matrix::Zero(a.values.rows(), b.values.cols());
  return gemm(AccumulationModel(m), elements(a, blocks * block, true), elements(b, blocks * block, false),
              zero, s, GemmOptions{detail::threads_for_product(a.values.rows(), b.values.cols(), k)});
}

AccumulationModel high_precision_model(const AccumulationModel& model, const Format& input) {
  const TensorCoreModel* tc = block_instruction(model);
  return tc ? AccumulationModel(instruction_for(*tc, input, input, false)) : model;
}

void check_block_instruction(const PrecisionPolicy& p, const OpRule& rule, const std::string& where) {
  const TensorCoreModel* tc = block_instruction(rule.accumulation);
  if (!tc) return;
  if (rule.follow_inputs || !block_scaled(p.fp8.scaling) || !rule.scaled_inputs)
    throw ConfigError(
        fmt::format("{}: '{}' multiplies block-scaled operands, but the policy does not "
                    "block-scale this op's inputs (a block-scaled policy: mxfp8 mxfp6 "
                    "mxfp4 nvfp4 fp8-blockwise)",
                    where, rule.accumulation.spec()));
  if (p.fp8.scaling == Fp8Scaling::blockwise)
    throw ConfigError(
        fmt::format("{}: '{}' multiplies E8M0 / E4M3 block-scaled operands; FP8 block scaling "
                    "(binary32 scales per 128-long k tile) runs on an unscaled FP8 GEMM",
                    where, rule.accumulation.spec()));
  const bool nv = p.fp8.scaling == Fp8Scaling::nvfp4;
  const char* want = nv ? "ue4m3" : "ue8m0";
  if (std::string(scale_name(*tc->scale)) != want)
    throw ConfigError(fmt::format("{}: '{}' takes {} scales, the {} recipe makes {} scales", where,
                                  rule.accumulation.spec(), scale_name(*tc->scale), nv ? "nvfp4" : "mx",
                                  want));
  if (tc->scale_block != p.fp8.block_size)
    throw ConfigError(
        fmt::format("{}: '{}' takes blocks of {} (scale_block), the recipe makes blocks of "
                    "{} (fp8.block_size)",
                    where, rule.accumulation.spec(), tc->scale_block, p.fp8.block_size));
  const Format &fwd = *rule.compute, &bwd = rule.backward_compute ? *rule.backward_compute : fwd;
  for (const auto& [x, y] : {std::pair{&fwd, &fwd}, {&fwd, &bwd}, {&bwd, &fwd}}) {
    try {
      (void)instruction_for(*tc, *x, *y);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(fmt::format("{}: no {} x {} GEMM on '{}': {}", where, x->name, y->name,
                                    rule.accumulation.spec(), e.what()));
    }
  }
}

void check_block_instructions(const PrecisionPolicy& p, const std::string& path) {
  for (const auto& [op, rule] : p.ops)
    if (!rule.follow_inputs)
      check_block_instruction(p, rule, fmt::format("{}.ops.{}.accumulation", path, op));
}

}  // namespace rpsim::sim::train
