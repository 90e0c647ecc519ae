"""Emulated matmul-class ops: the forward GEMM and both backward GEMMs of mm, bmm, matmul, addmm,
baddbmm, linear and conv1d/conv2d under one of rpsim's accumulation models, through the training
simulator's matmul (its native kernels where the model allows, sim::gemm otherwise; the same bits
as rpsim.gemm on the same operands, which tests/experiments/python/test_torch_ops.py checks)."""
import copy

import torch
import torch.nn.functional as F

from .. import _core
from . import _blockscale, _fp8
from ._gemm_config import DEFAULT_MODEL, GemmConfig  # noqa: F401 (rpsim.torch.GemmConfig)
from ._quantize import check_tensor, round_tensor
from ._unsupported import no_double_backward


def _flushed(before, after):
    return int(((before != 0) & (after == 0)).sum())


def _count(cfg, key, n):
    if cfg.log is not None:
        cfg.log[key] = cfg.log.get(key, 0) + n


def _gemm3(a, b, c, cfg, which, dtype, log_key=None, on_flush=None, on_raw=None):
    """a (B, m, k) @ b (B, k, n) (+ c) under cfg as a tensor of `dtype`; on_flush gets the mask of
    the entries the output rounding flushed to zero."""
    stream = cfg.stream + which if (cfg.seed or cfg.stream) else 0
    d = _core._torch_gemm(a.detach().numpy(), b.detach().numpy(), None if c is None else c.detach().numpy(),
                          cfg.model, cfg.seed, stream)
    out = torch.from_numpy(d)
    # A bias epilogue follows the forward GEMM: the output rounding comes after it (add_bias).
    if cfg.output and not (which == 0 and getattr(cfg, "epilogue", False)):
        raw, out = out, round_tensor(out, cfg.output)
        if on_raw is not None:
            on_raw(raw)
        if log_key and cfg.log is not None:
            _count(cfg, log_key, _flushed(raw, out))
        if on_flush is not None:
            on_flush((raw != 0) & (out == 0))
    return out.to(dtype)


def _cast(x, fmt):
    return round_tensor(x, fmt) if fmt else x


class _Gemm(torch.autograd.Function):
    """D = A B (+ C) over a batch: A (B, m, k), B (B, k, n), C (B, m, n) or None."""

    @staticmethod
    def forward(ctx, a, b, c, cfg):
        dtype = torch.promote_types(a.dtype, b.dtype)
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
        if cfg.log is not None:
            _count(cfg, "activation", _flushed(grad, g))
        da = db = None
        if ctx.needs_input_grad[0]:
            holder = getattr(cfg, "raw_input_grad", None)
            da = _gemm3(g, bc.transpose(1, 2).contiguous(), None, cfg, 2, ctx.dtypes[0],
                        on_flush=getattr(cfg, "on_input_grad_flush", None),
                        on_raw=None if holder is None else holder.append)
        if ctx.needs_input_grad[1]:
            db = _gemm3(ac.transpose(1, 2).contiguous(), g, None, cfg, 1, ctx.dtypes[1], "weight")
        dc = grad if ctx.has_c and ctx.needs_input_grad[2] else None
        return da, db, dc, None


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
    if cfg.log is not None:  # the cast of dy to e5m2 (disjoint from flushes upstream: dy != 0 here)
        _count(cfg, "activation", _flushed(grad, gq))
    da = db = None
    if ctx.needs_input_grad[0]:
        da = _fp8.dequantize(_gemm3(gq, bq.transpose(1, 2).contiguous(), None, _plain(cfg), 2, torch.float64),
                             sg, sb, cfg.accumulation_format)
        da = _cast(da, cfg.output).to(ctx.dtypes[0])
    if ctx.needs_input_grad[1]:
        raw = _fp8.dequantize(_gemm3(aq.transpose(1, 2).contiguous(), gq, None, _plain(cfg), 1, torch.float64),
                              sa, sg, cfg.accumulation_format)
        db = _cast(raw, cfg.output)
        if cfg.log is not None:
            _count(cfg, "weight", _flushed(raw, db))
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
        if cfg.log is not None:
            _count(cfg, "weight", _flushed(db, dbo))
        return grad.to(ctx.y_dtype), dbo.to(ctx.bias_dtype), None, None, None


def _with_epilogue(cfg, bias):
    """cfg for a GEMM whose output the bias epilogue rounds (a shallow copy: the same telemetry
    log and FP8 state)."""
    if bias is None:
        return cfg
    c = copy.copy(cfg)
    c.epilogue = True
    return c


def linear(x, weight, bias=None, model=None, *, config=None):
    """F.linear(x, weight, bias) = x @ weight^T (+ bias), x of any leading shape; without bias the
    same bits as rpsim.gemm(x, weight.T); the bias as add_bias's epilogue."""
    _check(("input", x), ("weight", weight), ("bias", bias))
    cfg = _config(model, config)
    lead = x.shape[:-1]
    y = _Gemm.apply(x.reshape(1, -1, x.shape[-1]), weight.t().unsqueeze(0), None,
                    _with_epilogue(cfg, bias)).reshape(*lead, -1)
    if bias is not None:
        y = add_bias(y, bias, cfg, cfg.accumulation_format, torch.promote_types(x.dtype, weight.dtype))
    return y


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _col2im(cols, size, kernel, dilation, padding, stride):
    """F.fold's sums with each pixel's terms in the order rpsim's Conv2d adds them: output
    positions in increasing order, i.e. kernel offsets in decreasing order (binary64 sums of
    binary64 terms depend on it; F.fold adds the offsets increasing)."""
    n, (h, w), (kh, kw) = cols.shape[0], size, kernel
    hp, wp = h + 2 * padding[0], w + 2 * padding[1]
    oh = (hp - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wp - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    g = cols.reshape(n, -1, kh, kw, oh, ow)
    dx = torch.zeros(n, g.shape[1], hp, wp, dtype=cols.dtype)
    for ky in reversed(range(kh)):
        for kx in reversed(range(kw)):
            y0, x0 = ky * dilation[0], kx * dilation[1]
            dx[:, :, y0:y0 + stride[0] * (oh - 1) + 1:stride[0], x0:x0 + stride[1] * (ow - 1) + 1:stride[1]] += \
                g[:, :, ky, kx]
    return dx[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w]


class _Unfold(torch.autograd.Function):
    """F.unfold (N, C * kh * kw, L) whose backward, col2im, sums the overlapping patches in
    binary64 and rounds once to the input's format (x_format; None: its dtype's), as rpsim
    train's Conv2d does."""

    @staticmethod
    def forward(ctx, x, geometry, x_format, telemetry=None):
        ctx.geometry, ctx.x_format, ctx.size, ctx.dtype = geometry, x_format, x.shape[-2:], x.dtype
        ctx.telemetry = telemetry  # (list the GEMM appends its raw input gradient to, count)
        kernel, dilation, padding, stride = geometry
        return F.unfold(x, kernel, dilation=dilation, padding=padding, stride=stride)

    @staticmethod
    def backward(ctx, grad):
        no_double_backward("conv2d's col2im")
        dx = _col2im(grad.double(), ctx.size, *ctx.geometry)
        if ctx.x_format is not None:
            dx = round_tensor(dx, ctx.x_format)
        if ctx.telemetry is not None and ctx.telemetry[0]:
            # Flushed: nonzero in the col2im of the GEMM's unrounded result, zero after the roundings.
            raw = ctx.telemetry[0].pop().reshape(grad.shape[0], -1, grad.shape[1]).transpose(1, 2)
            ctx.telemetry[1](((_col2im(raw, ctx.size, *ctx.geometry) != 0) & (dx == 0)), dx.shape)
        return dx.to(ctx.dtype), None, None, None


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, model=None, *, config=None):
    """F.conv2d by im2col: F.unfold's patches (N * L, C/groups * kh * kw) times the weight's
    transpose, one emulated GEMM per group, plus add_bias's epilogue; the input gradient's col2im
    as _Unfold's backward."""
    _check(("input", x), ("weight", weight), ("bias", bias))
    if isinstance(padding, str):
        raise ValueError(f"conv2d: padding '{padding}': give the padding as numbers")
    cfg = _config(model, config)
    unbatched = x.dim() == 3
    if unbatched:
        x = x.unsqueeze(0)
    n, _, h, w = x.shape
    oc, cg, kh, kw = weight.shape
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    outs = []
    ocg = oc // groups
    for g in range(groups):
        xg = x[:, g * cg:(g + 1) * cg]
        telemetry = None
        if groups == 1 and getattr(cfg, "on_col2im_flush", None) is not None:
            cfg = copy.copy(cfg)
            cfg.raw_input_grad = []
            telemetry = (cfg.raw_input_grad, cfg.on_col2im_flush)
        cols = _Unfold.apply(xg, ((kh, kw), dilation, padding, stride), getattr(cfg, "x_format", None), telemetry)
        a = cols.transpose(1, 2).reshape(1, -1, cols.shape[1])
        wg = weight[g * ocg:(g + 1) * ocg].reshape(ocg, -1)
        outs.append(_Gemm.apply(a, wg.t().unsqueeze(0), None, _with_epilogue(cfg, bias)).reshape(n, oh * ow, ocg))
    y = torch.cat(outs, dim=-1) if groups > 1 else outs[0]
    if bias is not None:
        y = add_bias(y, bias, cfg, cfg.accumulation_format, torch.promote_types(x.dtype, weight.dtype))
    y = y.transpose(1, 2).reshape(n, oc, oh, ow)
    return y.squeeze(0) if unbatched else y


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, model=None, *, config=None):
    """F.conv1d as conv2d over a height of 1."""
    if isinstance(padding, str):
        raise ValueError(f"conv1d: padding '{padding}': give the padding as a number")
    unbatched = x.dim() == 2
    x4 = x.unsqueeze(-2) if not unbatched else x.unsqueeze(0).unsqueeze(-2)
    y = conv2d(x4, weight.unsqueeze(-2), bias, (1, _one(stride)), (0, _one(padding)), (1, _one(dilation)),
               groups, model, config=config).squeeze(-2)
    return y.squeeze(0) if unbatched else y


def _one(v):
    return v if isinstance(v, int) else v[0]
