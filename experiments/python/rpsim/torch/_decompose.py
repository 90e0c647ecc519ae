"""The torch functions rpsim.torch.emulate runs as the ops they are made of (one table): PyTorch runs
each as one fused kernel that the emulation would reach whole; in its place it runs the function
here, under its mode, with the same arguments (the module's own parameters): run_decomposed."""
from ._attention import multi_head_attention_forward
from ._contract import addr, bilinear, chain_matmul, einsum, inner, kron, matrix_power, multi_dot, tensordot
from ._distance import cdist
from ._functions import inside
from ._grid import affine_grid
from ._stats import corrcoef, cov
from ._recurrent import RECURRENT
from ._tables import DECOMPOSED_NAMES

# The C++ table's decomposed names (torch_names.cpp), each with the function that runs it here.
_FUNCTIONS = {"multi_head_attention_forward": multi_head_attention_forward, "einsum": einsum,
              "tensordot": tensordot, "inner": inner, "kron": kron, "addr": addr, "matrix_power": matrix_power,
              "linalg_matrix_power": matrix_power, "affine_grid": affine_grid, "cov": cov, "corrcoef": corrcoef,
              "cdist": cdist,
              "bilinear": bilinear, "linalg_multi_dot": multi_dot, "chain_matmul": chain_matmul, **RECURRENT}
DECOMPOSED = {name: _FUNCTIONS[name] for name in DECOMPOSED_NAMES}


def run_decomposed(emulation, name, args, kwargs, cast):
    """DECOMPOSED[name](*args, **kwargs) under `emulation`'s mode, its inputs already in `cast` where autocast
    casts them (None: not; einsum's to the low format, cdist's on the fp32 list to binary32). Autocast runs
    such an op whole: its inner ops (einsum's sums) are not cast again, and in an fp32 one the GEMMs
    compute in binary32 (emulation.gemm_config)."""
    emulation.counts["decomposed"][name] += 1
    with inside(emulation, cast):
        return DECOMPOSED[name](*args, **kwargs)
