"""Emulated matmul-class ops: the forward GEMM and both backward GEMMs of mm, bmm, matmul, addmm,
baddbmm, linear and conv1d/conv2d under one of rpsim's accumulation models, through the training
simulator's matmul (its native kernels where the model allows, sim::gemm otherwise; the same bits
as rpsim.gemm on the same operands, which tests/experiments/python/test_torch_ops.py checks)."""
import copy

import torch

from .. import _core
from . import _blockscale, _fp8
from ._gemm_config import DEFAULT_MODEL, GemmConfig  # noqa: F401 (rpsim.torch.GemmConfig)
from ._quantize import check_tensor, round_tensor
from ._unsupported import no_double_backward


def output_grad_flushed(cfg, mask):
    """Telemetry: the entries of the output gradient that its cast for the backward GEMMs flushed."""
    if getattr(cfg, "on_output_grad_flush", None) is not None:
        cfg.on_output_grad_flush(mask)


def _host(t):
    """t's values as a NumPy array the C++ core reads: float16 and bfloat16 widened to float32
    (exact; NumPy has no bfloat16: torch's .numpy() refused a bfloat16 model's weights)."""
    t = t.detach()
    return (t.float() if t.dtype in (torch.float16, torch.bfloat16) else t).numpy()


def _gemm3(a, b, c, cfg, which, dtype, on_flush=None, on_raw=None):
    """a (B, m, k) @ b (B, k, n) (+ c) under cfg as a tensor of `dtype`; on_flush gets the mask of
    the entries the output rounding flushed to zero."""
    stream = cfg.stream + which if (cfg.seed or cfg.stream) else 0
    d = _core._torch_gemm(_host(a), _host(b), None if c is None else _host(c), cfg.model, cfg.seed, stream)
    out = torch.from_numpy(d)
    # A bias epilogue follows the forward GEMM: the output rounding comes after it (add_bias).
    if cfg.output and not (which == 0 and getattr(cfg, "epilogue", False)):
        raw, out = out, round_tensor(out, cfg.output)
        if on_raw is not None:
            on_raw(raw)
        if on_flush is not None:
            on_flush((raw != 0) & (out == 0))
    return out.to(dtype)


def _cast(x, fmt):
    return round_tensor(x, fmt) if fmt else x


class _Gemm(torch.autograd.Function):
    """D = A B (+ C) over a batch: A (B, m, k), B (B, k, n), C (B, m, n) or None."""

    @staticmethod
    def forward(ctx, a, b, c, cfg):
        # At least binary32: a half or bfloat16 model's GEMM output may hold a wider format.
        dtype = torch.promote_types(torch.promote_types(a.dtype, b.dtype), torch.float32)
        if getattr(cfg, "epilogue", False):
            # The bias epilogue adds to the accumulator's values (binary64 holds every
            # accumulation format): a cast to float32 first would round twice (a binary64
            # accumulation under a fixed-point output).
            dtype = torch.float64
        if cfg.fp8 is not None:
            block = cfg.fp8.recipe["scaling"] in _blockscale.SCALINGS
            return (_blockscale.forward if block else _fp8_forward)(ctx, a, b, cfg, dtype)
        if cfg.scale_block:
            _blockscale.refuse_unscaled(cfg)
        ac, bc = _cast(a.contiguous(), cfg.compute), _cast(b.contiguous(), cfg.compute)
        ctx.save_for_backward(ac, bc)
        ctx.cfg, ctx.has_c, ctx.dtypes = cfg, c is not None, (a.dtype, b.dtype)
        return _gemm3(ac, bc, None if c is None else c.contiguous(), cfg, 0, dtype)

    @staticmethod
    def backward(ctx, grad):
        cfg = ctx.cfg
        no_double_backward(f"a GEMM under {cfg.model}")
        if cfg.fp8 is not None and cfg.fp8.recipe["scaling"] in _blockscale.SCALINGS:
            return _blockscale.backward(ctx, grad)
        ac, bc = ctx.saved_tensors
        if cfg.fp8 is not None:
            return _fp8_backward(ctx, ac, bc, grad)
        g = _cast(grad.contiguous(), cfg.backward or cfg.compute)
        output_grad_flushed(cfg, (grad != 0) & (g == 0))
        da = db = None
        if ctx.needs_input_grad[0]:
            holder = getattr(cfg, "raw_input_grad", None)
            da = _gemm3(g, bc.transpose(1, 2).contiguous(), None, cfg, 2, ctx.dtypes[0],
                        on_flush=getattr(cfg, "on_input_grad_flush", None),
                        on_raw=None if holder is None else holder.append)
        if ctx.needs_input_grad[1]:
            db = _gemm3(ac.transpose(1, 2).contiguous(), g, None, cfg, 1, ctx.dtypes[1],
                        on_flush=getattr(cfg, "on_b_grad_flush", None))
        dc = grad if ctx.has_c and ctx.needs_input_grad[2] else None
        return da, db, dc, None


def b_grad_flushed(cfg, raw, rounded):
    """Telemetry: the entries of B's gradient (the weight's) that its output rounding flushed."""
    if getattr(cfg, "on_b_grad_flush", None) is not None:
        cfg.on_b_grad_flush((raw != 0) & (rounded == 0))


def _fmax(fmt):
    return _core.format_info(fmt)["max_finite"]


def _plain(cfg):
    plain = copy.copy(cfg)
    plain.output, plain.fp8 = None, None
    return plain


def _fp8_forward(ctx, a, b, cfg, dtype):
    st, fmax = cfg.fp8, _fmax(cfg.compute)
    sa, sb = _fp8.scale_of(a, fmax, st, "x"), _fp8.scale_of(b, fmax, st, "w")
    aq = _fp8.quantize_scaled(a.contiguous(), cfg.compute, fmax, sa, st.stats["x"])
    bq = _fp8.quantize_scaled(b.contiguous(), cfg.compute, fmax, sb, st.stats["w"])
    ctx.save_for_backward(aq, bq)
    ctx.cfg, ctx.has_c, ctx.dtypes, ctx.scales = cfg, False, (a.dtype, b.dtype), (sa, sb)
    d = _fp8.dequantize(_gemm3(aq, bq, None, _plain(cfg), 0, torch.float64), sa, sb, cfg.accumulation_format)
    return (d if getattr(cfg, "epilogue", False) else _cast(d, cfg.output)).to(dtype)


def _fp8_backward(ctx, aq, bq, grad):
    cfg, (sa, sb) = ctx.cfg, ctx.scales
    fmt = cfg.backward or cfg.compute
    fmax = _fmax(fmt)
    sg = _fp8.scale_of(grad, fmax, cfg.fp8, "dy")
    gq = _fp8.quantize_scaled(grad.contiguous(), fmt, fmax, sg, cfg.fp8.stats["dy"])
    output_grad_flushed(cfg, (grad != 0) & (gq == 0))  # the cast of dy to e5m2
    da = db = None
    if ctx.needs_input_grad[0]:
        da = _fp8.dequantize(_gemm3(gq, bq.transpose(1, 2).contiguous(), None, _plain(cfg), 2, torch.float64),
                             sg, sb, cfg.accumulation_format)
        da = _cast(da, cfg.output).to(ctx.dtypes[0])
    if ctx.needs_input_grad[1]:
        raw = _fp8.dequantize(_gemm3(aq.transpose(1, 2).contiguous(), gq, None, _plain(cfg), 1, torch.float64),
                              sa, sg, cfg.accumulation_format)
        db = _cast(raw, cfg.output)
        b_grad_flushed(cfg, raw, db)
        db = db.to(ctx.dtypes[1])
    return da, db, None, None


def _config(model, config):
    if config is not None:
        return config
    return GemmConfig(DEFAULT_MODEL if model is None else model)


def _check(*tensors):
    for name, t in tensors:
        if t is not None:
            check_tensor(t, name)


def mm(a, b, model=None, *, config=None):
    """a @ b for 2-D a (m, k) and b (k, n) under `model` (default tc:h100:fp16:fp32)."""
    _check(("a", a), ("b", b))
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"mm: needs 2-D tensors, got {a.dim()}-D and {b.dim()}-D")
    return _Gemm.apply(a.unsqueeze(0), b.unsqueeze(0), None, _config(model, config)).squeeze(0)


def bmm(a, b, model=None, *, config=None):
    """a @ b for 3-D a (B, m, k) and b (B, k, n)."""
    _check(("a", a), ("b", b))
    if a.dim() != 3 or b.dim() != 3:
        raise ValueError(f"bmm: needs 3-D tensors, got {a.dim()}-D and {b.dim()}-D")
    return _Gemm.apply(a, b, None, _config(model, config))


def matmul(a, b, model=None, *, config=None):
    """torch.matmul's broadcasting rules (1-D operands included), each product emulated."""
    _check(("a", a), ("b", b))
    cfg = _config(model, config)
    va, vb = a.dim() == 1, b.dim() == 1
    a2 = a.unsqueeze(0) if va else a
    b2 = b.unsqueeze(-1) if vb else b
    batch = torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    m, k, n = a2.shape[-2], a2.shape[-1], b2.shape[-1]
    a3 = a2.expand(*batch, m, k).reshape(-1, m, k)
    b3 = b2.expand(*batch, k, n).reshape(-1, k, n)
    out = _Gemm.apply(a3, b3, None, cfg).reshape(*batch, m, n)
    if va:
        out = out.squeeze(-2)
    if vb:
        out = out.squeeze(-1)
    return out


def _scaled(out, c, beta, alpha):
    # beta/alpha other than 1 are elementwise ops after the GEMM, in the tensor's dtype.
    return alpha * out + beta * c


def addmm(input, mat1, mat2, *, beta=1, alpha=1, model=None, config=None):
    """beta input + alpha (mat1 @ mat2); with beta = alpha = 1, input is the GEMM's C (rounded to
    the model's output format and accumulated as the model adds C), as rpsim.gemm(A, B, C)."""
    _check(("input", input), ("mat1", mat1), ("mat2", mat2))
    cfg = _config(model, config)
    if beta == 1 and alpha == 1:
        c = input.expand(mat1.shape[0], mat2.shape[1]).unsqueeze(0)
        return _Gemm.apply(mat1.unsqueeze(0), mat2.unsqueeze(0), c, cfg).squeeze(0)
    return _scaled(mm(mat1, mat2, config=cfg), input, beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, model=None, config=None):
    """beta input + alpha (batch1 @ batch2), batched; input is C when beta = alpha = 1."""
    _check(("input", input), ("batch1", batch1), ("batch2", batch2))
    cfg = _config(model, config)
    if beta == 1 and alpha == 1:
        c = input.expand(batch1.shape[0], batch1.shape[1], batch2.shape[2])
        return _Gemm.apply(batch1, batch2, c, cfg)
    return _scaled(bmm(batch1, batch2, config=cfg), input, beta, alpha)


def add_bias(y, bias, cfg, acc_format, dtype=None):
    """The bias as a GEMM epilogue, as `rpsim train`'s Linear adds it: the bias cast to the compute
    format, added in binary64 to the accumulator's values, rounded to the accumulation format and
    then to the op's output format; its gradient the column sums of the (cast) output gradient,
    summed in index order in the accumulation format. dtype: the result's (default y's)."""
    return _Bias.apply(y, bias, cfg, acc_format, dtype or y.dtype)


_ONES = {}


def _ones(n):
    """A (1, 1, n) float64 row of ones, made once per length (read only: the GEMM's A)."""
    if n not in _ONES:
        _ONES[n] = torch.ones(1, 1, n, dtype=torch.float64)
    return _ONES[n]


class _Bias(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, bias, cfg, acc_format, dtype):
        ctx.cfg, ctx.acc_format, ctx.bias_dtype, ctx.y_dtype = cfg, acc_format, bias.dtype, y.dtype
        # FP8 GEMMs: the bias in the accumulation format (Transformer Engine's epilogue).
        bias_format = acc_format if cfg.fp8 is not None else cfg.compute
        s = y.double() + _cast(bias.detach(), bias_format).double()
        s = round_tensor(s, acc_format)
        return _cast(s, cfg.output).to(dtype)

    @staticmethod
    def backward(ctx, grad):
        cfg = ctx.cfg
        no_double_backward("a GEMM's bias epilogue")
        # FP8: dbias from the unquantised gradient, as Transformer Engine reduces it.
        g = grad.contiguous() if cfg.fp8 is not None else _cast(grad.contiguous(), cfg.backward or cfg.compute)
        g = g.reshape(1, -1, grad.shape[-1])
        ones = _ones(g.shape[1])
        # A GEMM with one row of ones under sequential:<acc>:rne: each column summed in index order
        # with a rounding after every add, the products exact.
        db = torch.from_numpy(_core._torch_gemm(ones.numpy(), g.double().numpy(), None,
                                                f"sequential:{ctx.acc_format}:rne")).reshape(-1)
        dbo = _cast(db, cfg.output)
        if getattr(cfg, "on_bias_grad_flush", None) is not None:
            cfg.on_bias_grad_flush((db != 0) & (dbo == 0))
        return grad.to(ctx.y_dtype), dbo.to(ctx.bias_dtype), None, None, None


def _with_epilogue(cfg, bias):
    """cfg for a GEMM whose output the bias epilogue rounds (a shallow copy: the same telemetry
    log and FP8 state)."""
    if bias is None:
        return cfg
    c = copy.copy(cfg)
    c.epilogue = True
    return c


def _telemetry(cfg, weight, b_to_weight, out_to_output=None):
    """cfg for one GEMM of an op whose B is `weight` seen through b_to_weight (a (1, k, n) mask to the
    weight's shape) and whose output reaches the op's through out_to_output (None: a reshape): the
    emulation's callbacks on_param_grad_flush(tensor, mask) and on_output_grad_flush(mask) get masks
    in the shapes of the tensors they are about. cfg itself where neither is set."""
    on_param, on_out = getattr(cfg, "on_param_grad_flush", None), getattr(cfg, "on_output_grad_flush", None)
    if on_param is None and (on_out is None or out_to_output is None):
        return cfg
    c = copy.copy(cfg)
    if on_param is not None:
        c.on_b_grad_flush = lambda m: on_param(weight, b_to_weight(m))
    if on_out is not None and out_to_output is not None:
        c.on_output_grad_flush = lambda m: on_out(out_to_output(m))
    return c


def _bias_telemetry(cfg, bias):
    on_param = getattr(cfg, "on_param_grad_flush", None)
    if on_param is None:
        return cfg
    c = copy.copy(cfg)
    c.on_bias_grad_flush = lambda m: on_param(bias, m)
    return c


def _out_dtype(x, weight):
    """The op's result dtype: at least float32 (a half model's output may hold a binary32 format)."""
    return torch.promote_types(torch.promote_types(x.dtype, weight.dtype), torch.float32)


def linear(x, weight, bias=None, model=None, *, config=None):
    """F.linear(x, weight, bias) = x @ weight^T (+ bias), x of any leading shape; without bias the
    same bits as rpsim.gemm(x, weight.T); the bias as add_bias's epilogue."""
    _check(("input", x), ("weight", weight), ("bias", bias))
    cfg = _config(model, config)
    lead = x.shape[:-1]
    y = _Gemm.apply(x.reshape(1, -1, x.shape[-1]), weight.t().unsqueeze(0), None,
                    _telemetry(_with_epilogue(cfg, bias), weight, lambda m: m[0].t())).reshape(*lead, -1)
    if bias is not None:
        y = add_bias(y, bias, _bias_telemetry(cfg, bias), cfg.accumulation_format, _out_dtype(x, weight))
    return y


# The convolutions (im2col and col2im) live beside: the op table's kernels, from here as before.
from ._conv import conv1d, conv2d  # noqa: E402,F401
