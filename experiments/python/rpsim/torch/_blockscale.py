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
from ._fp8 import Fp8State
from ._quantize import round_tensor

SCALINGS = ("mx", "nvfp4")  # the block-scaled recipes (fp8.scaling) run here


def high_precision_layers(model, policy):
    """NVFP4's last linear layers kept in bf16 (fp8.high_precision_last), as rpsim train's model
    builder picks them: the names of the last N nn.Linear modules of a block-scaled policy."""
    fp8 = policy.get("fp8", {})
    last = fp8.get("high_precision_last", 0) if fp8.get("scaling") in SCALINGS else 0
    linears = [name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    return set(linears[len(linears) - last:]) if last > 0 else set()


def check_accumulation(policy, accumulation, ops=None):
    """ValueError naming `accumulation` (emulate's argument) where it cannot take the place of the
    policy's accumulation on `ops` (default: the ops whose inputs the policy block-scales), checked by
    the config parser's own test of ops.OP.accumulation (a block-scaled instruction against the
    recipe's scale format, block and operand pairs)."""
    if ops is None:
        rules = _core._torch_policy(policy)["ops"]
        ops = [op for op, r in rules.items() if isinstance(r, dict) and r.get("scaled_inputs")] or ["linear"]
        ops.sort(key=lambda op: op != "linear")  # a mismatch named on the op most models have
    _core._torch_check_accumulation(policy, accumulation, ops)


def recipe_state(recipe, model, compute, backward):
    """GemmConfig(recipe=...): (Fp8State, compute, backward) of a block-scaled policy's recipe, the
    formats defaulting to its linear rule's; ValueError naming recipe for a policy that does not
    block-scale, or naming model for an instruction that disagrees with the recipe. (NVFP4's
    stochastic gradient rounding is keyed by the GemmConfig's layer, else its seed and stream: _sr.)"""
    policy = _core._torch_policy(recipe)
    if policy.get("fp8", {}).get("scaling") not in SCALINGS:
        raise ValueError(f"recipe: policy {policy['name']} does not block-scale its GEMMs' inputs "
                         f"(a block-scaled policy: mxfp8 mxfp6 mxfp4 nvfp4)")
    rule = policy["ops"]["linear"]
    compute, backward = compute or rule["compute"], backward or rule["backward_compute"]
    spec = dict(recipe) if isinstance(recipe, dict) else {"name": recipe}
    ops = dict(spec.get("ops", {}))
    ops["linear"] = {**ops.get("linear", {}), "compute": compute, "backward_compute": backward}
    spec["ops"] = ops
    _core._torch_check_accumulation(spec, model, ["linear"], "model")
    return Fp8State(policy["fp8"]), compute, backward


def refuse_unscaled(cfg):
    """A GEMM on a block-scaled instruction (cfg.scale_block) whose operands no recipe block-scales."""
    raise ValueError(f"model: '{cfg.model}' multiplies block-scaled operands (blocks of {cfg.scale_block} along "
                     f"K): give GemmConfig a block-scaled recipe (recipe='mxfp8'), or emulate(model, 'mxfp8', "
                     f"accumulation=...), or call rpsim.gemm with sfa=, sfb=")


def keep_high_precision(cfg):
    """cfg (a GemmConfig copy) for a layer the recipe keeps in high precision (NVFP4's last linear):
    bf16 inputs without block scales, and for a block-scaled instruction its unscaled sibling on the
    same GPU, as rpsim train's high_precision_model picks it."""
    cfg.compute = cfg.backward = "bfloat16"
    unscaled = _core._torch_high_precision_model(cfg.model, cfg.compute)
    if unscaled is not None:
        cfg.model = unscaled
        cfg.input_format, cfg.accumulation_format, cfg.scale_block = _core._torch_model_formats(unscaled)


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


class Operand:
    """A block-quantised GEMM operand (B, r, c): values (elements times their block scales), each
    entry's block scale, the element format, and the per-matrix tensor scales (1 for MX)."""

    def __init__(self, values, scales, fmt, tensor_scales):
        self.values, self.scales, self.format, self.tensor_scales = values, scales, fmt, tensor_scales


def quantize(t, fmt, recipe, axis, stats, tiles=False, sr=None):
    """t (B, r, c) quantised matrix by matrix in blocks along axis (1: along rows, 0: down columns),
    or in tiles, as an Operand."""
    out, scales, tensor_scales = [], [], []
    for m in t.detach():
        q, s, ts, sc = _core._torch_block_quantize(m.double().numpy(), fmt, recipe["scaling"],
                                                   recipe["block_size"], axis, tiles, sr)
        add_stats(stats, s)
        out.append(torch.from_numpy(q))
        scales.append(torch.from_numpy(sc))
        tensor_scales.append(ts)
    if not out:
        return Operand(t.detach().double(), torch.ones_like(t.detach().double()), fmt, tensor_scales)
    return Operand(torch.stack(out), torch.stack(scales), fmt, tensor_scales)


def gemm(a, b, cfg, which):
    """a @ b of two Operands through rpsim train's block_matmul (a block-scaled instruction takes the
    block scales as SFA / SFB), dequantised by their tensor scales into the accumulation format;
    which: 0 forward, 1 weight gradient, 2 input gradient (the stochastic models' stream)."""
    stream = cfg.stream + which if (cfg.seed or cfg.stream) else 0
    d = torch.from_numpy(_core._torch_block_gemm(a.values.numpy(), a.scales.numpy(), a.format, b.values.numpy(),
                                                 b.scales.numpy(), b.format, cfg.model, cfg.seed, stream))
    return dequantize(d, a.tensor_scales, b.tensor_scales, cfg.accumulation_format)


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
    aq = quantize(a, cfg.compute, r, 1, st.stats["x"])
    bq = quantize(b, cfg.compute, r, 0, st.stats["w"], tiles=r.get("weight_2d", False))
    ctx.save_for_backward(a, b)
    ctx.cfg, ctx.has_c, ctx.dtypes = cfg, False, (a.dtype, b.dtype)
    d = gemm(aq, bq, cfg, 0)
    return (d if getattr(cfg, "epilogue", False) else _ops._cast(d, cfg.output)).to(dtype)


def _sr(cfg, which):
    """The stochastic-rounding key of dy's cast for the weight (3) or input (4) gradient GEMM: rpsim
    train's key of cfg.layer (name, step) under the run's seed, or cfg's own seed and stream."""
    if not cfg.fp8.recipe.get("gradient_sr", False):
        return None
    if cfg.layer is None:
        return cfg.seed, cfg.stream + which
    name, step = cfg.layer
    return _core._torch_matmul_stream(name, cfg.seed, step, which)


def backward(ctx, grad):
    a, b = ctx.saved_tensors
    cfg = ctx.cfg
    st, r = cfg.fp8, cfg.fp8.recipe
    fmt = cfg.backward or cfg.compute
    st.stats["dy"] = {}
    g = grad.contiguous()
    seed = cfg.seed
    # dW = x^T dy: K (tokens) runs down dy's columns and x's rows, both rotated by the RHT.
    g_w = rotated(g, r, seed)
    cols = quantize(g_w, fmt, r, 0, st.stats["dy"], sr=_sr(cfg, 3))
    flushed = (g_w != 0) & (cols.values == 0)
    da = db = None
    xt = quantize(rotated(a, r, seed).transpose(1, 2), cfg.compute, r, 1, st.stats["x"])
    if ctx.needs_input_grad[0]:
        rows = quantize(g, fmt, r, 1, st.stats["dy"], sr=_sr(cfg, 4))  # dx = dy W^T
        # Under the RHT the dW operand is rotated: only dx's cast is in dy's layout.
        cast = (g != 0) & (rows.values == 0)
        flushed = cast if r.get("hadamard", 0) else flushed | cast
        wt = quantize(b.transpose(1, 2), cfg.compute, r, 0, st.stats["w"], tiles=r.get("weight_2d", False))
        da = _ops._cast(gemm(rows, wt, cfg, 2), cfg.output).to(ctx.dtypes[0])
    _ops.output_grad_flushed(cfg, flushed)  # the casts of dy (either blocking) that flushed a nonzero entry
    if ctx.needs_input_grad[1]:
        raw = gemm(xt, cols, cfg, 1)
        db = _ops._cast(raw, cfg.output)
        _ops.b_grad_flushed(cfg, raw, db)
        db = db.to(ctx.dtypes[1])
    return da, db, None, None
