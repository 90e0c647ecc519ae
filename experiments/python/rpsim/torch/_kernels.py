"""What rpsim.torch runs for each torch function of the op table's GEMM rows (_tables.KERNELS)."""
from . import _conv, _ops
from ._tables import KERNELS

# Each torch function's implementation on the GEMM op; those that are a layer's own op (its FP8
# state, its telemetry: the layer's parameter is their weight); and the rows' other names.
_FUNCTIONS = {"linear": _ops.linear, "conv2d": _conv.conv2d, "conv1d": _conv.conv1d, "mm": _ops.mm,
              "bmm": _ops.bmm, "addmm": _ops.addmm, "baddbmm": _ops.baddbmm, "addmv": _ops.addmv,
              "addbmm": _ops.addbmm, "conv_transpose2d": _conv.conv_transpose2d,
              "conv_transpose1d": _conv.conv_transpose1d, "conv3d": _conv.conv3d,
              "conv_transpose3d": _conv.conv_transpose3d}
# The gemm_in_place row's names (x.addmm_(a, b)): the out-of-place op's result copied into x.
KERNEL_FUNCTIONS = {**_FUNCTIONS, **{f: _ops.in_place(_FUNCTIONS[f[:-1]]) for f, row in KERNELS.items()
                                     if row == "gemm_in_place"}}
LAYER_GEMMS = {"linear", "conv2d", "conv1d", "conv_transpose2d", "conv_transpose1d", "conv3d",
               "conv_transpose3d"}
ROW_FUNCTIONS = {"matmul": _ops.matmul, "dot": _ops.matmul}  # mv, __matmul__, dot: torch.matmul's meaning
