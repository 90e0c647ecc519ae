"""FP8 per-tensor scaling of a GEMM's operands, as `rpsim train`'s fp8-delayed and fp8-current
policies run their FP8 GEMMs (sim/train/src/layers/fp8.cpp; Transformer Engine's recipes,
Micikevicius et al. 2022): scale = binary32(fp8_max / amax / 2^margin), amax the tensor's own
(current) or the largest of the last amax_history_len steps' (delayed, "max") or the last one
("most_recent"); 1 where amax is 0 or not finite. The operand x is stored as
round_fp8(clamp(binary32(x * scale), +-fp8_max)), and the GEMM's result multiplied by
binary32(1 / (scale_a * scale_b)) and rounded to the accumulation format."""
import torch

from ._quantize import round_tensor


class Fp8State:
    """One layer's amax histories and last statistics, per tensor ("x", "w", "dy")."""

    def __init__(self, recipe):
        self.recipe = recipe
        self.history = {"x": [], "w": [], "dy": []}
        self.stats = {}


def _f32(v):
    return float(torch.tensor(v, dtype=torch.float32))


def scale_of(t, fmt_max, state, which):
    r = state.recipe
    amax_now = float(t.detach().abs().max()) if t.numel() else 0.0
    amax = amax_now
    hist = state.history[which]
    if r["scaling"] == "delayed":
        if hist:
            amax = hist[-1] if r["amax_compute_algo"] == "most_recent" else max(hist)
        hist.append(amax_now)
        del hist[:-r["amax_history_len"]]
    ok = amax > 0 and amax != float("inf") and amax == amax
    scale = _f32(fmt_max / amax / 2.0 ** r["margin"]) if ok else 1.0
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
