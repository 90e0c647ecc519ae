"""Block-scaled GEMMs (OCP MX v1.0 blocks with E8M0 scales: fp8-mx, mxfp8, mxfp6, mxfp4; NVIDIA's
NVFP4 recipe: nvfp4), as `rpsim train`'s Linear runs them (sim/train/src/layers/linear.cpp): each
operand quantised in blocks along the GEMM's K by the trainer's own block_quantize
(rpsim._core._torch_block_quantize), the element format the op rule's compute (forward) or
backward_compute (gradient) format, the block size and layout the policy's fp8 recipe
(fp8.block_size; fp8.weight_2d: weights in block x block tiles), so a recipe with another element
format or block size needs no change here. MX block scales are powers of two applied exactly; NVFP4's
per-tensor FP32 scale is divided out after the GEMM in binary32 (the epilogue of
sim/train/src/layers/common.hpp dequantize). The weight-gradient GEMM's inputs take the recipe's
random Hadamard transform along K (fp8.hadamard, signs from the emulation's seed) and the output
gradient rounds stochastically where fp8.gradient_sr says, keyed by layer and step as the trainer
keys it. Backward quantises the saved unquantised inputs again along the other axis; a tensor's
statistics add up over its uses in the step, as the trainer's Fp8Stats do."""
import math

import numpy as np
import torch

from .. import _core
from . import _ops
from ._quantize import round_tensor

SCALINGS = ("mx", "nvfp4")  # the block-scaled recipes (fp8.scaling) run here


def high_precision_layers(model, policy):
    """NVFP4's last linear layers kept in bf16 (fp8.high_precision_last), as rpsim train's model
    builder picks them: the names of the last N nn.Linear modules of a block-scaled policy."""
    fp8 = policy.get("fp8", {})
    last = fp8.get("high_precision_last", 0) if fp8.get("scaling") in SCALINGS else 0
    linears = [name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    return set(linears[len(linears) - last:]) if last > 0 else set()


def add_stats(into, s):
    """Adds one quantisation's statistics to a tensor's record for the step."""
    into["amax"] = max(into.get("amax", 0.0), s["amax"])
    for key, pick in (("scale_min", min), ("scale_max", max)):
        v, old = s[key], into.get(key, math.nan)
        if not math.isnan(v):
            into[key] = v if math.isnan(old) else pick(old, v)
        else:
            into.setdefault(key, math.nan)
    for key in ("entries", "saturated", "flushed"):
        into[key] = into.get(key, 0) + s[key]


def quantize(t, fmt, recipe, axis, stats, tiles=False, sr=None):
    """t (B, r, c) quantised matrix by matrix in blocks along axis (1: along rows, 0: down columns),
    or in tiles: (values, per-matrix tensor scales (1 for MX))."""
    out, scales = [], []
    for m in t.detach():
        q, s, ts = _core._torch_block_quantize(m.double().numpy(), fmt, recipe["scaling"], recipe["block_size"],
                                               axis, tiles, sr)
        add_stats(stats, s)
        out.append(torch.from_numpy(q))
        scales.append(ts)
    return (torch.stack(out) if out else t.detach().double()), scales


def dequantize(d, sa, sb, fmt):
    """d (B, m, n) times binary32(1 / (sa * sb)) per matrix, rounded to the accumulation format `fmt`."""
    for i in range(d.shape[0]):
        inv = float(np.float32(1.0 / (sa[i] * sb[i])))
        if inv != 1.0:
            d[i] = round_tensor(d[i] * inv, fmt)
    return d


def rotated(t, recipe, seed):
    """t (B, r, c) with the recipe's random Hadamard transform on each full chunk of rows."""
    n = recipe.get("hadamard", 0)
    if not n:
        return t.detach().double()
    return torch.stack([torch.from_numpy(_core._torch_hadamard_rows(m.double().numpy(), n, seed))
                        for m in t.detach()])


def forward(ctx, a, b, cfg, dtype):
    st, r = cfg.fp8, cfg.fp8.recipe
    st.stats["x"], st.stats["w"] = {}, {}  # a new record per step (forward comes first)
    aq, sx = quantize(a, cfg.compute, r, 1, st.stats["x"])
    bq, sw = quantize(b, cfg.compute, r, 0, st.stats["w"], tiles=r.get("weight_2d", False))
    ctx.save_for_backward(a, b)
    ctx.cfg, ctx.has_c, ctx.dtypes = cfg, False, (a.dtype, b.dtype)
    d = dequantize(_ops._gemm3(aq, bq, None, _ops._plain(cfg), 0, torch.float64), sx, sw,
                   cfg.accumulation_format)
    return (d if getattr(cfg, "epilogue", False) else _ops._cast(d, cfg.output)).to(dtype)


def _sr(cfg, which):
    """The stochastic-rounding key of dy's cast for the weight (3) or input (4) gradient GEMM."""
    st = cfg.fp8
    if not st.recipe.get("gradient_sr", False):
        return None
    return _core._torch_matmul_stream(getattr(st, "layer", ""), getattr(st, "seed", 0),
                                      st.step_of() if hasattr(st, "step_of") else 0, which)


def backward(ctx, grad):
    a, b = ctx.saved_tensors
    cfg = ctx.cfg
    st, r = cfg.fp8, cfg.fp8.recipe
    fmt = cfg.backward or cfg.compute
    st.stats["dy"] = {}
    g = grad.contiguous()
    seed = getattr(st, "seed", 0)
    # dW = x^T dy: K (tokens) runs down dy's columns and x's rows, both rotated by the RHT.
    g_w = rotated(g, r, seed)
    cols, sdy = quantize(g_w, fmt, r, 0, st.stats["dy"], sr=_sr(cfg, 3))
    flushed = (g_w != 0) & (cols == 0)
    da = db = None
    xt, sx = quantize(rotated(a, r, seed).transpose(1, 2), cfg.compute, r, 1, st.stats["x"])
    if ctx.needs_input_grad[0]:
        rows, sdy_x = quantize(g, fmt, r, 1, st.stats["dy"], sr=_sr(cfg, 4))  # dx = dy W^T
        # Under the RHT the dW operand is rotated: only dx's cast is in dy's layout.
        flushed = ((g != 0) & (rows == 0)) if r.get("hadamard", 0) else flushed | ((g != 0) & (rows == 0))
        wt, sw = quantize(b.transpose(1, 2), cfg.compute, r, 0, st.stats["w"], tiles=r.get("weight_2d", False))
        raw = dequantize(_ops._gemm3(rows, wt, None, _ops._plain(cfg), 2, torch.float64), sdy_x, sw,
                         cfg.accumulation_format)
        da = _ops._cast(raw, cfg.output).to(ctx.dtypes[0])
    if cfg.log is not None:  # the casts of dy (either blocking) that flushed a nonzero entry
        _ops._count(cfg, "activation", int(flushed.sum()))
    if ctx.needs_input_grad[1]:
        raw = dequantize(_ops._gemm3(xt, cols, None, _ops._plain(cfg), 1, torch.float64), sx, sdy,
                         cfg.accumulation_format)
        db = _ops._cast(raw, cfg.output)
        if cfg.log is not None:
            _ops._count(cfg, "weight", _ops._flushed(raw, db))
        db = db.to(ctx.dtypes[1])
    return da, db, None, None
