"""Block-scaled GEMMs (the fp8-mx policy: OCP MX v1.0 blocks with E8M0 scales), as `rpsim train`'s
Linear and Conv2d run them (sim/train/src/layers/linear.cpp): each operand quantised in blocks
along the GEMM's K by the trainer's own mx_quantize (rpsim._core._torch_mx_quantize), the element
format the op rule's compute (forward) or backward_compute (gradient) format and the block size
the policy row's fp8.block_size, so a policy row with another element format or block size needs
no change here. The block scales are powers of two applied exactly: no dequantising epilogue.
Backward quantises the saved unquantised inputs again along the other axis (a transposed
operand's blocks run down the other dimension); a tensor's statistics add up over its uses in
the step, as the trainer's Fp8Stats do."""
import math

import torch

from .. import _core
from . import _ops


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


def quantize(t, fmt, block, axis, stats):
    """t (B, r, c) quantised matrix by matrix in blocks along axis (1: along rows, 0: down columns)."""
    out = []
    for m in t.detach():
        q, s = _core._torch_mx_quantize(m.double().numpy(), fmt, block, axis)
        add_stats(stats, s)
        out.append(torch.from_numpy(q))
    return torch.stack(out) if out else t.detach().double()


def forward(ctx, a, b, cfg, dtype):
    st, block = cfg.fp8, cfg.fp8.recipe["block_size"]
    st.stats["x"], st.stats["w"] = {}, {}  # a new record per step (forward comes first)
    aq = quantize(a, cfg.compute, block, 1, st.stats["x"])
    bq = quantize(b, cfg.compute, block, 0, st.stats["w"])
    ctx.save_for_backward(a, b)
    ctx.cfg, ctx.has_c, ctx.dtypes = cfg, False, (a.dtype, b.dtype)
    d = _ops._gemm3(aq, bq, None, _ops._plain(cfg), 0, torch.float64)
    return (d if getattr(cfg, "epilogue", False) else _ops._cast(d, cfg.output)).to(dtype)


def backward(ctx, grad):
    a, b = ctx.saved_tensors
    cfg = ctx.cfg
    st, block = cfg.fp8, cfg.fp8.recipe["block_size"]
    fmt = cfg.backward or cfg.compute
    st.stats["dy"] = {}
    g = grad.contiguous()
    cols = quantize(g, fmt, block, 0, st.stats["dy"])  # dW = x^T dy: K runs down dy's columns
    flushed = (g != 0) & (cols == 0)
    da = db = None
    xt = quantize(a.transpose(1, 2), cfg.compute, block, 1, st.stats["x"])
    if ctx.needs_input_grad[0]:
        rows = quantize(g, fmt, block, 1, st.stats["dy"])  # dx = dy W^T: K runs along dy's rows
        flushed |= (g != 0) & (rows == 0)
        wt = quantize(b.transpose(1, 2), cfg.compute, block, 0, st.stats["w"])
        da = _ops._cast(_ops._gemm3(rows, wt, None, _ops._plain(cfg), 2, torch.float64), cfg.output)
        da = da.to(ctx.dtypes[0])
    if cfg.log is not None:  # the casts of dy (either blocking) that flushed a nonzero entry
        _ops._count(cfg, "activation", int(flushed.sum()))
    if ctx.needs_input_grad[1]:
        raw = _ops._gemm3(xt, cols, None, _ops._plain(cfg), 1, torch.float64)
        db = _ops._cast(raw, cfg.output)
        if cfg.log is not None:
            _ops._count(cfg, "weight", _ops._flushed(raw, db))
        db = db.to(ctx.dtypes[1])
    return da, db, None, None
