"""The C++ tables rpsim.torch reads (the ones the CLI reads, exported by the module, not copied)."""
from torch import nn

from .. import _core

# PyTorch's CUDA autocast lists for ops outside rpsim's op table (torch/csrc/autograd/
# autocast_mode.cpp, 1.13: "lower_precision_fp" and "fp32"); everything else follows its inputs.
TORCH_LOWER_PRECISION = {"prelu", "addbmm", "chain_matmul", "conv_transpose1d", "conv_transpose2d",
                         "conv_transpose3d", "conv3d", "conv_tbc", "_convolution", "rnn_tanh", "rnn_relu",
                         "lstm_cell", "gru_cell"}
TORCH_FP32 = {"acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal",
              "rsqrt", "sinh", "tan", "pow", "softplus", "group_norm", "norm", "frobenius_norm", "nuclear_norm",
              "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
              "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
              "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
              "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm",
              "logsumexp", "log_softmax", "softmax", "cumprod", "cumsum", "prod", "sum", "mean", "layer_norm",
              "cross_entropy"}
# No arithmetic: the output holds values of the input's format.
LAYOUT = {"view", "reshape", "transpose", "permute", "t", "contiguous", "flatten", "unflatten", "squeeze",
          "unsqueeze", "expand", "expand_as", "__getitem__", "narrow", "select", "chunk", "split", "unbind", "clone",
          "detach", "view_as", "reshape_as", "repeat", "tile", "flip", "roll", "movedim", "cat", "stack",
          "masked_fill", "masked_fill_", "where", "float", "to", "type_as", "pad", "max_pool2d", "max_pool1d", "relu",
          "relu_", "dropout", "triu", "tril", "gather", "index_select", "embedding", "__setitem__", "zero_", "fill_",
          "copy_", "maximum", "minimum", "max", "min", "abs", "neg", "__neg__", "requires_grad_", "retain_grad",
          "share_memory_"}
# The torch functions rpsim runs on its own GEMMs, and the op-table row whose rule they take.
KERNELS = {"linear": "linear", "conv2d": "conv2d", "conv1d": "conv2d", "matmul": "matmul", "mm": "matmul",
           "bmm": "matmul", "addmm": "matmul", "baddbmm": "matmul", "__matmul__": "matmul"}
# Leaf module types and the op-table row they are.
MODULE_OPS = {nn.Linear: "linear", nn.Conv2d: "conv2d", nn.Conv1d: "conv2d", nn.ReLU: "relu", nn.GELU: "gelu",
              nn.LayerNorm: "layer_norm", nn.MaxPool2d: "max_pool2d", nn.Embedding: "embedding",
              nn.CrossEntropyLoss: "cross_entropy", nn.MSELoss: "mse_loss", nn.Softmax: "softmax"}


def ops():
    """The op table as {name: row} (name, autocast class, fp8_gemm, help), read from the C++ table."""
    return {row["name"]: row for row in _core._torch_ops()}


def policies():
    """The named policies as {name: description}, read from the C++ table."""
    return {row["name"]: row["description"] for row in _core._torch_policies()}


def policy(spec):
    """The policy row of `spec` (a name of the policy table or a policy object as configs write it) as
    {field: value}, as rpsim train resolves it (weights, gradients, ops, fp8 ...); ValueError naming
    the field and the table's names for a bad one."""
    return _core._torch_policy(spec)


def supported():
    """What emulate puts on rpsim's arithmetic, generated from the tables above and the C++ op table:
    the text error messages end with."""
    from ._layers import LAYER_KERNELS
    kernels = sorted(set(KERNELS) | set(LAYER_KERNELS))
    modules = ", ".join(f"{m.__name__} ({op})" for m, op in MODULE_OPS.items())
    return (f"emulated on rpsim's kernels: torch.{', torch.'.join(k for k in kernels if not k.startswith('_'))}; "
            f"module types with a row of the op table: {modules}; the op table's rows: {', '.join(ops())}; "
            "any other op runs in PyTorch on its inputs' values, its output rounded to its autocast class's "
            "format (rpsim.torch.emulate's summary() lists which)")
