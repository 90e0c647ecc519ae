"""Emulated matmul-class ops: mm, bmm, matmul, addmm, baddbmm, linear and conv1d/conv2d as autograd
functions over the op core's GEMM op (rpsim._core._GemmOp: the C++ op `rpsim train`'s layers run,
its casts, FP8/MX/NVFP4 quantisation, GEMM, epilogue and both backward GEMMs) and its col2im. This
file only routes tensors: layout (F.unfold, reshapes) and the autograd plumbing. Without a rule
the GEMM is rpsim.gemm's on the same operands (tests/experiments/python/test_torch_ops.py)."""
import copy

import torch
import torch.nn.functional as F

from .. import _core
from ._gemm_config import DEFAULT_MODEL, GemmConfig  # noqa: F401 (rpsim.torch.GemmConfig)
from ._quantize import check_tensor
from ._unsupported import no_double_backward


def _count(cfg, key, n):
    if cfg.log is not None and n:
        cfg.log[key] = cfg.log.get(key, 0) + n


def _keys(cfg):
    return dict(seed=cfg.seed, stream=cfg.stream, layer=cfg.layer)


def _np(t):
    """t's values as a C-contiguous float32 or float64 NumPy array (no copy where t already is one)."""
    t = t.detach()
    if t.dtype not in (torch.float32, torch.float64):
        t = t.float()  # float16 / bfloat16: exact in binary32
    return t.contiguous().numpy()


class _Gemm(torch.autograd.Function):
    """D = epilogue(A B (+ C)) over a batch on the op core's GEMM op (cfg.op): A (B, m, k), B (B, k, n),
    bias (n,) or None, C (B, m, n) or None; a_format the format of A's values (a rule that follows its
    inputs computes in it)."""

    @staticmethod
    def forward(ctx, a, b, bias, c, cfg, a_format):
        d, ctx.saved = cfg.op.forward(_np(a), a_format, _np(b), None if bias is None else _np(bias.reshape(1, -1)),
                                      None if c is None else _np(c), **_keys(cfg))
        ctx.cfg, ctx.has_c = cfg, c is not None
        ctx.dtypes = (a.dtype, b.dtype, None if bias is None else bias.dtype)
        return torch.from_numpy(d).to(torch.promote_types(a.dtype, b.dtype))

    @staticmethod
    def backward(ctx, grad):
        cfg = ctx.cfg
        no_double_backward(f"a GEMM under {cfg.model}")
        need = ctx.needs_input_grad
        holder = getattr(cfg, "raw_input_grad", None)
        col2im = holder is not None and need[0]
        g = cfg.op.backward(ctx.saved, _np(grad), need[0], need[1], need[2], **_keys(cfg), raw=col2im)
        _count(cfg, "activation", g["dy_cast_flushed"])
        _count(cfg, "weight", g["db_flushed"] + g["bias_flushed"])
        da = db = dbias = None
        if need[0]:
            da = torch.from_numpy(g["da"]).to(ctx.dtypes[0])
            if cfg.on_input_grad_flush is not None:
                cfg.on_input_grad_flush(torch.from_numpy(g["da_flushed"]))
            if col2im:
                holder.append(torch.from_numpy(g["da_raw"]))  # col2im's flush count (_Unfold)
        if need[1]:
            db = torch.from_numpy(g["db"]).to(ctx.dtypes[1])
        if need[2]:
            dbias = torch.from_numpy(g["bias"]).reshape(-1).to(ctx.dtypes[2])
        dc = grad if ctx.has_c and need[3] else None
        return da, db, dbias, dc, None, None


def _gemm(a, b, cfg, bias=None, c=None):
    return _Gemm.apply(a, b, bias, c, cfg, cfg.a_format or _dtype_format(a))


def _dtype_format(t):
    return getattr(t, "_rpsim_format", "binary64" if t.dtype == torch.float64 else "binary32")


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
    return _gemm(a.unsqueeze(0), b.unsqueeze(0), _config(model, config)).squeeze(0)


def bmm(a, b, model=None, *, config=None):
    """a @ b for 3-D a (B, m, k) and b (B, k, n)."""
    _check(("a", a), ("b", b))
    if a.dim() != 3 or b.dim() != 3:
        raise ValueError(f"bmm: needs 3-D tensors, got {a.dim()}-D and {b.dim()}-D")
    return _gemm(a, b, _config(model, config))


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
    out = _gemm(a3, b3, cfg).reshape(*batch, m, n)
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
        return _gemm(mat1.unsqueeze(0), mat2.unsqueeze(0), cfg, c=c).squeeze(0)
    return _scaled(mm(mat1, mat2, config=cfg), input, beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, model=None, config=None):
    """beta input + alpha (batch1 @ batch2), batched; input is C when beta = alpha = 1."""
    _check(("input", input), ("batch1", batch1), ("batch2", batch2))
    cfg = _config(model, config)
    if beta == 1 and alpha == 1:
        c = input.expand(batch1.shape[0], batch1.shape[1], batch2.shape[2])
        return _gemm(batch1, batch2, cfg, c=c)
    return _scaled(bmm(batch1, batch2, config=cfg), input, beta, alpha)


def linear(x, weight, bias=None, model=None, *, config=None):
    """F.linear(x, weight, bias) = x @ weight^T (+ bias), x of any leading shape; without bias the
    same bits as rpsim.gemm(x, weight.T); the bias in the GEMM's epilogue (the op core's)."""
    _check(("input", x), ("weight", weight), ("bias", bias))
    cfg = _config(model, config)
    lead = x.shape[:-1]
    return _gemm(x.reshape(1, -1, x.shape[-1]), weight.t().unsqueeze(0), cfg, bias=bias).reshape(*lead, -1)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class _Unfold(torch.autograd.Function):
    """F.unfold (N, C * kh * kw, L) whose backward is the op core's col2im: the overlapping patches
    summed in binary64 in rpsim train's Conv2d order and rounded once to the input's format
    (x_format; None: its dtype's). telemetry: (list the GEMM appends its raw input gradient to,
    the count to call with the flushed mask)."""

    @staticmethod
    def forward(ctx, x, geometry, x_format, telemetry=None):
        ctx.geometry, ctx.x_format, ctx.shape, ctx.dtype = geometry, x_format, x.shape, x.dtype
        ctx.telemetry = telemetry
        kernel, dilation, padding, stride = geometry
        return F.unfold(x, kernel, dilation=dilation, padding=padding, stride=stride)

    @staticmethod
    def backward(ctx, grad):
        no_double_backward("conv2d's col2im")
        raw = None
        if ctx.telemetry is not None and ctx.telemetry[0]:
            raw = ctx.telemetry[0].pop().reshape(grad.shape[0], -1, grad.shape[1]).transpose(1, 2).contiguous()
        kernel, dilation, padding, stride = ctx.geometry
        dx, flushed = _core._col2im(_np(grad).astype("float64", copy=False), tuple(ctx.shape[-2:]), ctx.shape[1],
                                    kernel, dilation, padding, stride, ctx.x_format,
                                    None if raw is None else raw.numpy())
        if flushed is not None:
            ctx.telemetry[1](torch.from_numpy(flushed), ctx.shape)
        return torch.from_numpy(dx).to(ctx.dtype), None, None, None


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, model=None, *, config=None):
    """F.conv2d by im2col: F.unfold's patches (N * L, C/groups * kh * kw) times the weight's
    transpose, one emulated GEMM per group with its slice of the bias in the GEMM's epilogue; the
    input gradient's col2im as _Unfold's backward."""
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
        if groups == 1 and cfg.on_col2im_flush is not None:
            cfg = copy.copy(cfg)
            cfg.raw_input_grad = []
            telemetry = (cfg.raw_input_grad, cfg.on_col2im_flush)
        cols = _Unfold.apply(xg, ((kh, kw), dilation, padding, stride), cfg.x_format, telemetry)
        a = cols.transpose(1, 2).reshape(1, -1, cols.shape[1])
        wg = weight[g * ocg:(g + 1) * ocg].reshape(ocg, -1)
        bg = None if bias is None else bias[g * ocg:(g + 1) * ocg]
        outs.append(_gemm(a, wg.t().unsqueeze(0), cfg, bias=bg).reshape(n, oh * ow, ocg))
    y = torch.cat(outs, dim=-1) if groups > 1 else outs[0]
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
