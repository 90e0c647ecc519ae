"""Which devices rpsim's arithmetic runs on: the CPU core always, the CUDA backend where rpsim was built
with nvcc (sim/cuda, include/rpsim/cuda/backend.h) and a CUDA device is present.

Both give the same bits: the per-element arithmetic (rounding, the Tensor Core block FMA, the scale rules)
is one definition compiled for both (RPSIM_HD), checked against the CPU core by the ctest label
`device-arith`.
"""
from .. import _core


def backends():
    """{"cpu": {"built": True, "available": True}, "cuda": {"built": bool, "available": bool}}:
    `built` says rpsim was compiled with the CUDA backend, `available` that a CUDA device answers now
    (the backend's own device lookup, not PyTorch's)."""
    built = bool(_core._cuda_built())
    available = built and _core._cuda_device_count() > 0
    return {"cpu": {"built": True, "available": True},
            "cuda": {"built": built, "available": bool(available)}}
