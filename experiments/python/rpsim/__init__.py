"""rpsim from Python: bit-exact reduced-precision arithmetic over the same C++ core as the
`rpsim` command line (formats, accumulation models, loss scalers, the training simulator).

NumPy arrays in and out; the GIL is released during long calls and the C++ core uses its own
OpenMP threads. Bad formats, roundings, keys or values raise ValueError naming them; arrays of
the wrong dtype raise TypeError.
"""
from ._core import (accumulation_kinds, accumulation_spec, decode, e8m0_cast, encode, explain, format_info, formats,
                    gemm, kernel_preset_schedule, mx_quantize, nvfp4_quantize, quantize, recipe_check, recipe_effect,
                    recipes, round, round_scalar, scaler_trajectory)
from ._gemm import GemmCheckResult, gemm_check
from ._train import TrainResult, train

__all__ = ["round", "encode", "decode", "round_scalar", "formats", "format_info", "explain", "gemm", "gemm_check",
           "GemmCheckResult", "scaler_trajectory", "train", "TrainResult", "mx_quantize", "nvfp4_quantize",
           "quantize", "recipes", "recipe_check", "recipe_effect", "e8m0_cast", "accumulation_kinds", "accumulation_spec", "kernel_preset_schedule"]
