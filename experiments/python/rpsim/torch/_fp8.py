"""FP8 per-tensor scaling of a GEMM's operands, as `rpsim train`'s fp8-delayed and fp8-current
policies run their FP8 GEMMs (sim/train/src/layers/fp8.cpp): the scale comes from the same C++
implementation of Transformer Engine's rules (sim/scaling fp8_scaling.hpp: delayed scaling starts
at 1 and keeps the previous scale on a zero or non-finite amax; current scaling is 1 there), amax
as TE reduces it (NaN elements skipped). The operand x is stored as
round_fp8(clamp(binary32(x * scale), +-fp8_max)), and the GEMM's result multiplied by
binary32(1 / (scale_a * scale_b)) and rounded to the accumulation format."""
import torch

from .. import _core
from ._quantize import round_tensor


class Fp8State:
    """One layer's delayed-scaling states and last statistics, per tensor ("x", "w", "dy")."""

    def __init__(self, recipe):
        self.recipe = recipe
        self.delayed = {}
        self.stats = {}


def _f32(v):
    return float(torch.tensor(v, dtype=torch.float32))


def scale_of(t, fmt_max, state, which):
    r = state.recipe
    a = t.detach().abs()
    amax_now = float(torch.where(torch.isnan(a), torch.zeros_like(a), a).max()) if t.numel() else 0.0
    if r["scaling"] == "delayed":
        d = state.delayed.get(which)
        if d is None:
            d = state.delayed[which] = _core._DelayedScaling(fmt_max, r["margin"], r["amax_history_len"],
                                                            r["amax_compute_algo"])
        scale = d.scale()
        d.record_amax(amax_now)
        d.update()
    else:
        scale = _core._current_scale(amax_now, fmt_max * 2.0 ** -r["margin"])
    state.stats[which] = {"amax": amax_now, "scale": scale}  # a new record per use (per step)
    return scale


def quantize_scaled(t, fmt, fmt_max, scale, stats=None):
    """round_fmt(clamp(binary32(t * scale))); stats (a dict) gets the entries, the saturated ones
    (finite, beyond fmt_max before the clamp) and the flushed ones (nonzero, quantised to 0)."""
    v = t.detach().double() * scale
    v = round_tensor(v, "binary32")
    finite = torch.isfinite(v)
    q = round_tensor(torch.where(finite, v.clamp(-fmt_max, fmt_max), v), fmt)
    if stats is not None:
        stats["entries"] = stats.get("entries", 0) + t.numel()
        stats["saturated"] = stats.get("saturated", 0) + int((finite & (v.abs() > fmt_max)).sum())
        stats["flushed"] = stats.get("flushed", 0) + int(((t != 0) & (q == 0)).sum())
    return q


def dequantize(acc, sa, sb, acc_format):
    inv = _f32(1.0 / (sa * sb))
    if inv == 1.0:
        return acc
    return round_tensor(acc.double() * inv, acc_format)
