"""Emulated conv1d and conv2d: im2col patches times the weight on the emulated GEMM of _ops, with
the input gradient's col2im summed in rpsim train's order and rounded once to the input's format."""
import copy

import torch
import torch.nn.functional as F

from ._ops import _Gemm, _bias_telemetry, _check, _config, _out_dtype, _telemetry, _with_epilogue, add_bias
from ._quantize import round_tensor
from ._unsupported import no_double_backward


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
        ws = weight[g * ocg:(g + 1) * ocg]
        gcfg = _telemetry(_with_epilogue(cfg, bias), ws, lambda m, s=ws.shape: m[0].t().reshape(s),
                          lambda m, g=g: _conv_output_mask(m, (n, oc, oh, ow), g * ocg))
        outs.append(_Gemm.apply(a, ws.reshape(ocg, -1).t().unsqueeze(0), None, gcfg).reshape(n, oh * ow, ocg))
    y = torch.cat(outs, dim=-1) if groups > 1 else outs[0]
    if bias is not None:
        y = add_bias(y, bias, _bias_telemetry(cfg, bias), cfg.accumulation_format, _out_dtype(x, weight))
    y = y.transpose(1, 2).reshape(n, oc, oh, ow)
    return y.squeeze(0) if unbatched else y


def _conv_output_mask(m, shape, first_channel):
    """A group's GEMM-output mask (1, N * L, channels) in the convolution's output layout (N, C, H, W)."""
    n, _, oh, ow = shape
    full = torch.zeros(shape, dtype=torch.bool)
    part = m.reshape(n, oh * ow, -1).transpose(1, 2).reshape(n, -1, oh, ow)
    full[:, first_channel:first_channel + part.shape[1]] = part
    return full


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
