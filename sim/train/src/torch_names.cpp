// PyTorch's names for the ops outside the op table (ops.hpp TorchName): what
// rpsim.torch's dispatch does with each. The names are those
// TorchFunctionMode sees (torch functions, Tensor methods and operators).
#include "rpsim/train/ops.hpp"

namespace rpsim::sim::train {
namespace {

using TC = TorchClass;

// torch.autocast's CUDA lists (torch/csrc/autograd/autocast_mode.cpp, 1.13):
// "lower_precision_fp" and "fp32", without the ops of the op table, and
// without the names TorchFunctionMode never sees as such (_convolution,
// rnn_tanh, lstm_cell ... are reached through the modules below, which are
// decomposed or refused before).
const TorchName kNames[] = {
    {"prelu", TC::lower_precision, ""},
    // CUDA's addr kernel computes beta * self + (alpha * vec1) * vec2 in the
    // tensors' type: at half and bfloat16 (c10::Half arithmetic) each product
    // and the sum rounded to it, so it runs as those elementwise ops.
    {"addr", TC::lower_precision_decomposed, "the products and the sum, each rounded"},
    {"acos", TC::fp32, ""},
    {"asin", TC::fp32, ""},
    {"cosh", TC::fp32, ""},
    {"erfinv", TC::fp32, ""},
    {"exp", TC::fp32, ""},
    {"expm1", TC::fp32, ""},
    {"log", TC::fp32, ""},
    {"log10", TC::fp32, ""},
    {"log2", TC::fp32, ""},
    {"log1p", TC::fp32, ""},
    {"reciprocal", TC::fp32, ""},
    {"rsqrt", TC::fp32, ""},
    {"sinh", TC::fp32, ""},
    {"tan", TC::fp32, ""},
    {"pow", TC::fp32, ""},
    {"softplus", TC::fp32, ""},
    {"group_norm", TC::fp32, ""},
    {"norm", TC::fp32, ""},
    {"frobenius_norm", TC::fp32, ""},
    {"nuclear_norm", TC::fp32, ""},
    {"cosine_similarity", TC::fp32, ""},
    {"poisson_nll_loss", TC::fp32, ""},
    {"cosine_embedding_loss", TC::fp32, ""},
    {"nll_loss", TC::fp32, ""},
    {"nll_loss2d", TC::fp32, ""},
    {"hinge_embedding_loss", TC::fp32, ""},
    {"kl_div", TC::fp32, ""},
    {"l1_loss", TC::fp32, ""},
    {"smooth_l1_loss", TC::fp32, ""},
    {"huber_loss", TC::fp32, ""},
    {"margin_ranking_loss", TC::fp32, ""},
    {"multilabel_margin_loss", TC::fp32, ""},
    {"soft_margin_loss", TC::fp32, ""},
    {"triplet_margin_loss", TC::fp32, ""},
    {"multi_margin_loss", TC::fp32, ""},
    {"binary_cross_entropy_with_logits", TC::fp32, ""},
    {"dist", TC::fp32, ""},
    {"pdist", TC::fp32, ""},
    // ATen's cdist: p = 2 past 25 rows (or compute_mode use_mm_for_euclid_dist)
    // is _euclidean_dist (norms, one matmul, clamp, sqrt, its own backward),
    // which a GPU runs inside autocast's fp32 cast, the matmul in binary32.
    {"cdist", TC::fp32_decomposed, "_euclidean_dist's norms, matmul and sqrt, or _cdist_forward"},
    {"renorm", TC::fp32, ""},
    {"logsumexp", TC::fp32, ""},
    {"log_softmax", TC::fp32, ""},
    {"cumprod", TC::fp32, ""},
    {"cumsum", TC::fp32, ""},
    {"prod", TC::fp32, ""},
    {"sum", TC::fp32, ""},
    {"mean", TC::fp32, ""},
    // No arithmetic: the output holds values of the input's format.
    {"view", TC::layout, ""},
    {"reshape", TC::layout, ""},
    {"transpose", TC::layout, ""},
    {"permute", TC::layout, ""},
    {"t", TC::layout, ""},
    {"contiguous", TC::layout, ""},
    {"flatten", TC::layout, ""},
    {"unflatten", TC::layout, ""},
    {"squeeze", TC::layout, ""},
    {"unsqueeze", TC::layout, ""},
    {"expand", TC::layout, ""},
    {"expand_as", TC::layout, ""},
    {"__getitem__", TC::layout, ""},
    {"__setitem__", TC::layout, ""},
    {"narrow", TC::layout, ""},
    {"select", TC::layout, ""},
    {"chunk", TC::layout, ""},
    {"split", TC::layout, ""},
    {"unbind", TC::layout, ""},
    {"clone", TC::layout, ""},
    {"detach", TC::layout, ""},
    {"view_as", TC::layout, ""},
    {"reshape_as", TC::layout, ""},
    {"repeat", TC::layout, ""},
    {"tile", TC::layout, ""},
    {"flip", TC::layout, ""},
    {"roll", TC::layout, ""},
    {"movedim", TC::layout, ""},
    {"cat", TC::layout, ""},
    {"stack", TC::layout, ""},
    {"masked_fill", TC::layout, ""},
    {"masked_fill_", TC::layout, ""},
    {"where", TC::layout, ""},
    {"float", TC::layout, ""},
    {"to", TC::layout, ""},
    {"type_as", TC::layout, ""},
    {"pad", TC::layout, ""},
    {"dropout", TC::layout, ""},
    {"triu", TC::layout, ""},
    {"tril", TC::layout, ""},
    {"gather", TC::layout, ""},
    {"index_select", TC::layout, ""},
    {"zero_", TC::layout, ""},
    {"fill_", TC::layout, ""},
    {"copy_", TC::layout, ""},
    {"maximum", TC::layout, ""},
    {"minimum", TC::layout, ""},
    {"max", TC::layout, ""},
    {"min", TC::layout, ""},
    {"abs", TC::layout, ""},
    {"neg", TC::layout, ""},
    {"__neg__", TC::layout, ""},
    {"requires_grad_", TC::layout, ""},
    {"retain_grad", TC::layout, ""},
    {"share_memory_", TC::layout, ""},
    // GEMMs PyTorch fuses into one kernel that rpsim.torch cannot split:
    // refused, with what to write instead.
    {"conv_tbc", TC::refused, "conv1d on the input permuted to (batch, channel, time)"},
    {"scaled_dot_product_attention", TC::refused, "matmul and softmax"},
    // Fused modules run as the GEMMs and elementwise ops they are made of
    // (rpsim.torch's _attention and _recurrent).
    {"multi_head_attention_forward", TC::decomposed, "linear, matmul and softmax"},
    {"lstm", TC::decomposed, "a loop of linear layers and elementwise gates"},
    {"gru", TC::decomposed, "a loop of linear layers and elementwise gates"},
    {"rnn_tanh", TC::decomposed, "a loop of linear layers and tanh"},
    {"rnn_relu", TC::decomposed, "a loop of linear layers and relu"},
    {"lstm_cell", TC::decomposed, "linear layers and elementwise gates"},
    {"gru_cell", TC::decomposed, "linear layers and elementwise gates"},
    {"rnn_tanh_cell", TC::decomposed, "a linear layer and tanh"},
    {"rnn_relu_cell", TC::decomposed, "a linear layer and relu"},
    // As ATen lowers them (Linear.cpp): permutes, sums and one bmm per pair
    // of operands; one mm. einsum, multi_dot and chain_matmul are on
    // autocast's list: their inputs cast once, their inner ops (a sum) on the
    // cast values with autocast excluded (autocast_mode.h, WrapFunction_).
    {"einsum", TC::lower_precision_decomposed, "permutes, sums and a bmm per pair of operands"},
    {"tensordot", TC::decomposed, "permutes and an mm"},
    {"inner", TC::decomposed, "tensordot over the last dimensions"},
    {"kron", TC::decomposed, "a broadcast product (no GEMM)"},
    {"bilinear", TC::decomposed, "two bmm per output feature (ATen's _trilinear)"},
    {"linalg_multi_dot", TC::lower_precision_decomposed, "mm in ATen's matrix-chain order"},
    {"chain_matmul", TC::lower_precision_decomposed, "mm in ATen's matrix-chain order"},
    {"matrix_power", TC::decomposed, "matmuls by repeated squaring"},
    {"linalg_matrix_power", TC::decomposed, "matmuls by repeated squaring"},
    // AffineGridGenerator.cpp: a base grid times theta^T, one bmm.
    {"affine_grid", TC::decomposed, "a base grid times theta^T (a bmm)"},
    // Correlation.cpp: composites, their one mm on the matmul row.
    {"cov", TC::decomposed, "a weighted mean, the centred observations, one mm"},
    {"corrcoef", TC::decomposed, "cov divided by the standard deviations"},
    // In-place ops whose backward reads their own result (PyTorch 1.13's
    // tools/autograd/derivatives.yaml writes `result` in their formula):
    // rounding that result in place after the op would move the tensor's
    // version past the one autograd saved, so they run as their out-of-place
    // twin, rounded, and copied back (rpsim/torch/_inplace.py).
    {"sigmoid_", TC::result_saving, ""},
    {"tanh_", TC::result_saving, ""},
    {"exp_", TC::result_saving, ""},
    {"exp2_", TC::result_saving, ""},
    {"expm1_", TC::result_saving, ""},
    {"sqrt_", TC::result_saving, ""},
    {"rsqrt_", TC::result_saving, ""},
    {"reciprocal_", TC::result_saving, ""},
    {"tan_", TC::result_saving, ""},
    // The dispatcher's ops that run a GEMM (the names a TorchDispatchMode sees:
    // an op with its own backward is seen whole, its inner GEMM not; a
    // composite one as the ops it calls). rpsim.torch's kernels reach none.
    {"aten::mm", TC::aten_gemm, ""},
    {"aten::bmm", TC::aten_gemm, ""},
    {"aten::addmm", TC::aten_gemm, ""},
    {"aten::baddbmm", TC::aten_gemm, ""},
    {"aten::addbmm", TC::aten_gemm, ""},
    {"aten::addmv", TC::aten_gemm, ""},
    {"aten::mv", TC::aten_gemm, ""},
    {"aten::dot", TC::aten_gemm, ""},
    {"aten::vdot", TC::aten_gemm, ""},
    {"aten::matmul", TC::aten_gemm, ""},
    {"aten::_euclidean_dist", TC::aten_gemm, ""},
    {"aten::affine_grid_generator", TC::aten_gemm, ""},
    {"aten::_trilinear", TC::aten_gemm, ""},
    {"aten::convolution", TC::aten_gemm, ""},
    {"aten::_convolution", TC::aten_gemm, ""},
    {"aten::conv_tbc", TC::aten_gemm, ""},
    {"aten::_addmm_activation", TC::aten_gemm, ""},
    {"aten::_scaled_mm", TC::aten_gemm, ""},
    {"aten::mkldnn_rnn_layer", TC::aten_gemm, ""},
    {"aten::_cudnn_rnn", TC::aten_gemm, ""},
    {"aten::_thnn_fused_lstm_cell", TC::aten_gemm, ""},
    {"aten::_thnn_fused_gru_cell", TC::aten_gemm, ""},
    {"aten::_native_multi_head_attention", TC::aten_gemm, ""},
    {"aten::_transformer_encoder_layer_fwd", TC::aten_gemm, ""},
    {"aten::_scaled_dot_product_flash_attention", TC::aten_gemm, ""},
    {"aten::_scaled_dot_product_efficient_attention", TC::aten_gemm, ""},
    {"aten::_scaled_dot_product_cudnn_attention", TC::aten_gemm, ""},
    {"aten::_scaled_dot_product_flash_attention_for_cpu", TC::aten_gemm, ""},
};

}  // namespace

std::span<const TorchName> torch_names() {
  return kNames;
}

const char* torch_class_name(TorchClass c) {
  switch (c) {
    case TorchClass::lower_precision: return "lower_precision";
    case TorchClass::fp32: return "fp32";
    case TorchClass::layout: return "layout";
    case TorchClass::refused: return "refused";
    case TorchClass::refused_module: return "refused_module";
    case TorchClass::lower_precision_decomposed: return "lower_precision_decomposed";
    case TorchClass::fp32_decomposed: return "fp32_decomposed";
    case TorchClass::aten_gemm: return "aten_gemm";
    case TorchClass::result_saving: return "result_saving";
    default: return "decomposed";
  }
}

}  // namespace rpsim::sim::train
