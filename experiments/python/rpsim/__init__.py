"""rpsim from Python: bit-exact reduced-precision arithmetic over the same C++ core as the
`rpsim` command line (formats, accumulation models, loss scalers, the training simulator).

NumPy arrays in and out; the GIL is released during long calls and the C++ core uses its own
OpenMP threads. Bad formats, roundings, keys or values raise ValueError naming them; arrays of
the wrong dtype raise TypeError.
"""
import os as _os

# OpenMP threads that sleep while they wait (issue #36): libgomp's default spins (about 3 ms after
# each parallel region and at its barriers), and beside other processes a spinning thread keeps the
# thread a region waits for off its core; the default thread count then ran 5x slower than one
# thread. libgomp reads OMP_WAIT_POLICY once, when it is loaded: with _core below, unless the
# process loaded it earlier (torch does), in which case this changes nothing and the work
# thresholds of the C++ core keep small work on one thread. A user's own OMP_WAIT_POLICY or
# GOMP_SPINCOUNT is kept; ours is removed again once libgomp has read it.
_added = "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ
if _added:
    _os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
try:
    from ._core import (accumulation_kinds, accumulation_spec, decode, e8m0_cast, encode, explain, format_info,
                        formats, gemm, keep_freed_memory, kernel_preset_schedule, mx_quantize, nvfp4_quantize,
                        quantize, recipe_check, recipe_effect, recipes, round, round_scalar, scaler_trajectory)
finally:
    if _added:
        del _os.environ["OMP_WAIT_POLICY"]
    del _added
from ._gemm import GemmCheckResult, gemm_check
from ._train import TrainResult, train

__all__ = ["round", "encode", "decode", "round_scalar", "formats", "format_info", "explain", "gemm", "gemm_check",
           "GemmCheckResult", "scaler_trajectory", "train", "TrainResult", "mx_quantize", "nvfp4_quantize",
           "quantize", "recipes", "recipe_check", "recipe_effect", "e8m0_cast", "accumulation_kinds", "accumulation_spec", "kernel_preset_schedule"]
