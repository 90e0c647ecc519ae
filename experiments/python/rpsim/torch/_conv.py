"""Emulated convolutions (1-D, 2-D, 3-D and their transposes). conv1d, conv2d and conv3d: im2col
(vol2col) patches (the op core's: a copy) times the weight on the op core's GEMM op (_ops), all
groups in one call, each group's slice of the bias in its epilogue, with the input gradient's col2im
the op core's (rpsim train's order, rounded once to the input's format). The transposed ones: the
grouped GEMM's columns summed by col2im (_Fold) or col2vol (_Fold3d)."""
import copy

import torch
import torch.nn.functional as F

from .. import _core
from ._ops import _bias_telemetry, _check, _config, _dtype_format, _gemm, _telemetry, _values
from ._quantize import _OWN_FORMAT, round_tensor
from ._unsupported import no_double_backward


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class _Unfold(torch.autograd.Function):
    """F.unfold (N, C * kh * kw, L) whose backward is the op core's col2im: the overlapping patches
    summed in binary64 in rpsim train's Conv2d order and rounded once to the input's format
    (x_format; None: its dtype's). telemetry: (list the GEMM appends its raw input gradient to,
    the count to call with the flushed mask)."""

    @staticmethod
    def forward(ctx, x, geometry, x_format, telemetry=None, cast=None, patches=None):
        ctx.geometry, ctx.x_format, ctx.shape, ctx.dtype = geometry, x_format, x.shape, x.dtype
        ctx.telemetry = telemetry
        kernel, dilation, padding, stride = geometry
        if patches is not None:
            # The GEMM op makes A from `patches` itself (_patches): the columns are only autograd's node
            # for col2im, a zero-strided stand-in of their shape that holds no memory.
            n, c, h, w = x.shape
            out = [(s + 2 * p - d * (k - 1) - 1) // st + 1
                   for s, k, d, p, st in zip((h, w), kernel, dilation, padding, stride)]
            return x.new_zeros(()).expand(n, c * kernel[0] * kernel[1], out[0] * out[1])
        if x.dtype in (torch.float32, torch.float64) and x.device.type == "cpu":
            # The op core's im2col: F.unfold's copy, several times faster (8% of a ResNet-style step).
            # cast: x's values as the GEMM casts A (_cast_input), patched instead of x's.
            return torch.from_numpy(_core._im2col(x.detach().numpy() if cast is None else cast, kernel,
                                                  dilation, padding, stride))
        return F.unfold(x, kernel, dilation=dilation, padding=padding, stride=stride)

    @staticmethod
    def backward(ctx, grad):
        no_double_backward("conv2d's col2im")
        raw = None
        if ctx.telemetry is not None and ctx.telemetry[0]:
            # A view: the GEMM's column-major raw dA (1, N * L, C * kh * kw), read at its strides.
            raw = ctx.telemetry[0].pop().reshape(grad.shape[0], -1, grad.shape[1]).transpose(1, 2)
        kernel, dilation, padding, stride = ctx.geometry
        # Read where they lie (the gradient of a transposed view): no contiguous copy.
        dx, flushed = _core._col2im(_values(grad).numpy(), tuple(ctx.shape[-2:]), ctx.shape[1],
                                    kernel, dilation, padding, stride, ctx.x_format,
                                    None if raw is None else raw.numpy())
        if flushed is not None:
            ctx.telemetry[1](torch.from_numpy(flushed), ctx.shape)
        return torch.from_numpy(dx).to(ctx.dtype), None, None, None, None, None


def _patches(x, cast, geometry):
    """(x's values, or their cast, as a C-contiguous NumPy array, kernel, dilation, padding, stride): the
    GEMM op's `patches`, from which it im2cols its folded A straight into its binary64 carrier (the
    float32 columns and their widening copy were two passes over the largest operand of a
    convolution), or None where the columns go through torch (not a CPU float32/float64 input)."""
    if cast is None and (x.dtype not in (torch.float32, torch.float64) or x.device.type != "cpu"):
        return None
    return (x.detach().contiguous().numpy() if cast is None else cast,) + tuple(geometry)


def _cast_input(x, cfg):
    """(x's values cast as the GEMM op casts its A, as a NumPy array of x's shape, and the format of
    those values), or (None, None): the GEMM casts the patches itself (_gemm's default format). A
    rounding of each entry on its own commutes with im2col's copies, so x is cast once instead of
    each of its k*k copies (perf: rounding the patches was 6% of a ResNet-style fp16-amp step); the
    GEMM then skips its cast, and the bits are the same (test_torch_conv.py)."""
    if x.dtype not in _OWN_FORMAT or x.device.type != "cpu":
        return None, None
    cast = cfg.op.cast_input(x.detach().reshape(x.shape[0], -1).contiguous().numpy(),
                             cfg.a_format or _OWN_FORMAT[x.dtype])
    return (None, None) if cast is None else (cast[0].reshape(x.shape), cast[1])


def _prologue(x, weight, bias, model, config):
    """(the GEMM config, x with a batch dimension, whether x had none)."""
    _check(("input", x), ("weight", weight), ("bias", bias))
    unbatched = x.dim() == weight.dim() - 1
    return _config(model, config), (x.unsqueeze(0) if unbatched else x), unbatched


def _numeric_padding(x, weight, padding, stride, dilation, of):
    """(x, padding) with a padding string turned into numbers as ATen's _convolution_mode does (of: _one,
    _pair or _triple): 'valid' is none; 'same' pads d * (k - 1) per spatial dimension, half of it on each
    side, and an odd total's extra entry by a zero pad on the input's high side first (constant_pad_nd)."""
    if not isinstance(padding, str):
        return x, padding
    if padding == "valid":
        return x, 0
    if padding != "same":
        raise RuntimeError(f"Invalid padding string: '{padding}'")  # PyTorch's messages, its exception
    if any(s != 1 for s in _seq(of(stride))):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    total = [d * (k - 1) for d, k in zip(_seq(of(dilation)), weight.shape[2:])]
    extra = [t - t // 2 * 2 for t in total]
    if any(extra):
        x = F.pad(x, [v for e in reversed(extra) for v in (0, e)])
    return x, tuple(t // 2 for t in total)


def _seq(v):
    return v if isinstance(v, (tuple, list)) else (v,)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, model=None, *, config=None):
    """F.conv2d by im2col: F.unfold's patches (N * L, C * kh * kw) times the weight's transpose, each
    group's columns times its output channels' (the op core's grouped GEMM: one call, each group's
    slice of the bias in its epilogue); the input gradient's col2im as _Unfold's backward."""
    x, padding = _numeric_padding(x, weight, padding, stride, dilation, _pair)
    cfg, x, unbatched = _prologue(x, weight, bias, model, config)
    n, _, h, w = x.shape
    oc, _, kh, kw = weight.shape
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    telemetry = None
    if cfg.on_col2im_flush is not None:
        cfg = copy.copy(cfg)
        cfg.raw_input_grad = []
        telemetry = (cfg.raw_input_grad, cfg.on_col2im_flush)
    cast, a_format = _cast_input(x, cfg)
    geometry = ((kh, kw), dilation, padding, stride)
    patches = _patches(x, cast, geometry)
    cols = _Unfold.apply(x, geometry, cfg.x_format, telemetry, cast, patches)
    a = cols.transpose(1, 2)  # (N, L, C * kh * kw), folded into one matrix by the GEMM op
    # The weight's transpose (C/groups * kh * kw, C_out): group g's columns are its output channels.
    gcfg = _bias_telemetry(_telemetry(cfg, weight, lambda m, s=weight.shape: m[0].t().reshape(s),
                                      lambda m: _conv_output_mask(m, (n, oc, oh, ow))), bias)
    # Column-major (N * L, C_out): its permute to (N, C, L) below is a copy of whole L-runs, not a
    # transposing one (the same values).
    y = _gemm(a, weight.reshape(oc, -1).t().unsqueeze(0), gcfg, bias=bias, fold=True, groups=groups,
              column_major=True, a_format=a_format, patches=patches)
    # Contiguous (N, C, H, W), as PyTorch's conv2d returns it: a channels-last view broke a user's
    # y.view(n, -1) and sent BatchNorm to ATen's channels-last kernel, whose sums depend on the thread
    # count (a ResNet-18 step gave other bits with 2 threads than with 1).
    y = y.reshape(n, oh * ow, oc).transpose(1, 2).reshape(n, oc, oh, ow).contiguous()
    return y.squeeze(0) if unbatched else y


def _conv_output_mask(m, shape):
    """The GEMM-output mask (1, N * L, channels) in the convolution's output layout (N, C, H, W), or
    (N, C, T, H, W)."""
    n = shape[0]
    return m.reshape(n, -1, m.shape[-1]).transpose(1, 2).reshape(shape)


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, model=None, *, config=None):
    """F.conv1d as conv2d over a height of 1."""
    x, padding = _numeric_padding(x, weight, padding, stride, dilation, _one)
    unbatched = x.dim() == 2
    x4 = x.unsqueeze(-2) if not unbatched else x.unsqueeze(0).unsqueeze(-2)
    y = conv2d(x4, weight.unsqueeze(-2), bias, (1, _one(stride)), (0, _one(padding)), (1, _one(dilation)),
               groups, model, config=config).squeeze(-2)
    return y.squeeze(0) if unbatched else y


def _one(v):
    return v if isinstance(v, int) else v[0]


class _Fold(torch.autograd.Function):
    """col2im, (N, C * kh * kw, L) columns into (N, C, H, W): the op core's (the overlapping patches
    summed in binary64 in rpsim train's Conv2d order), the bias added in binary64, the sum rounded
    once to `fmt`; backward F.unfold (a gather) and, for the bias, autograd's sum."""

    @staticmethod
    def forward(ctx, cols, bias, size, channels, geometry, fmt):
        ctx.geometry, ctx.bias = geometry, bias is not None
        kernel, dilation, padding, stride = geometry
        y, _ = _core._col2im(_values(cols).numpy(), size, channels, kernel, dilation, padding, stride, "binary64")
        y = torch.from_numpy(y)
        if bias is not None:
            y += bias.detach().double().reshape(1, -1, 1, 1)
        return round_tensor(y, fmt).to(cols.dtype)

    @staticmethod
    def backward(ctx, grad):
        no_double_backward("conv_transpose2d's col2im")
        kernel, dilation, padding, stride = ctx.geometry
        dcols = F.unfold(grad, kernel, dilation=dilation, padding=padding, stride=stride)
        return dcols, grad.sum((0, 2, 3)) if ctx.bias else None, None, None, None, None


def _rows_side_by_side(weight, groups):
    """A transposed convolution's B (C_in/groups, C_out * k): group g's columns are its C_in/groups rows
    of the weight (C_in, C_out/groups, ...) (a copy where groups > 1), so that the grouped GEMM's
    columns come out channel after channel, as col2im reads them; and the map of a (1, C_in/groups,
    C_out * k) mask back to the weight's shape."""
    cg = weight.shape[0] // groups
    b = weight.reshape(groups, cg, -1).transpose(0, 1).reshape(cg, -1)
    return b, lambda m: m[0].reshape(cg, groups, -1).transpose(0, 1).reshape(weight.shape)


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                     model=None, *, config=None):
    """F.conv_transpose2d as the input gradient of a conv2d (as CPU PyTorch and cuDNN run it): all
    groups in one call of the op core's grouped GEMM, each group's x pixels (N * H * W, C_in/groups)
    times its weight rows (C_in/groups, C_out/groups * kh * kw), the columns (in the GEMM's output
    format) summed into the output by the op core's col2im in binary64, the bias added there, and the
    sum rounded once to the GEMM's output format (an epilogue after the fold: _Fold). The bias
    gradient is autograd's sum of the output gradient, rounded with the other parameter gradients."""
    cfg, x, unbatched = _prologue(x, weight, bias, model, config)
    n, _, h, w = x.shape
    _, ocg, kh, kw = weight.shape
    stride, padding, dilation, extra = _pair(stride), _pair(padding), _pair(dilation), _pair(output_padding)
    size = tuple((i - 1) * s - 2 * p + d * (k - 1) + e + 1
                 for i, s, p, d, k, e in zip((h, w), stride, padding, dilation, (kh, kw), extra))
    op = getattr(cfg, "op", None)
    fmt = op.output_format(cfg.a_format or _dtype_format(x)) if op is not None else _dtype_format(x)
    b, to_weight = _rows_side_by_side(weight, groups)
    gcfg = _telemetry(cfg, weight, to_weight,
                      lambda m: _folded_mask(m, (n, ocg * groups) + size, (kh, kw), dilation, padding, stride))
    cols = _gemm(x.flatten(2).transpose(1, 2), b.unsqueeze(0), gcfg, fold=True, groups=groups).reshape(n, h * w, -1)
    y = _Fold.apply(cols.transpose(1, 2), bias, size, ocg * groups, ((kh, kw), dilation, padding, stride), fmt)
    return y.squeeze(0) if unbatched else y


def _folded_mask(m, shape, kernel, dilation, padding, stride):
    """The column mask (1, N * L, channels * kh * kw) in the output's layout (N, C, H, W): an output
    entry's gradient appears in each column it was summed from, all flushed or none."""
    n = shape[0]
    cols = m.reshape(n, -1, m.shape[-1]).transpose(1, 2).double()
    return F.fold(cols, shape[2:], kernel, dilation=dilation, padding=padding, stride=stride) > 0


def conv_transpose1d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                     model=None, *, config=None):
    """F.conv_transpose1d as conv_transpose2d over a height of 1."""
    x4 = x.unsqueeze(-2) if x.dim() == 3 else x.unsqueeze(0).unsqueeze(-2)
    y = conv_transpose2d(x4, weight.unsqueeze(-2), bias, (1, _one(stride)), (0, _one(padding)),
                         (0, _one(output_padding)), groups, (1, _one(dilation)), model, config=config).squeeze(-2)
    return y.squeeze(0) if x.dim() == 2 else y


def _vol2col(x, geometry):
    """conv3d's columns of x (N, C, T, H, W): (N, T' * H' * W', C * kt * kh * kw) in ATen's vol2col
    order (channel, then the kernel's depth, height, width), and the output's sizes (T', H', W')."""
    kernel, dilation, padding, stride = geometry
    xp = F.pad(x, [p for q in reversed(padding) for p in (q, q)])
    for dim, (k, d, s) in enumerate(zip(kernel, dilation, stride)):
        xp = xp.unfold(2 + dim, d * (k - 1) + 1, s)
    patches = xp[..., ::dilation[0], ::dilation[1], ::dilation[2]]  # (N, C, T', H', W', kt, kh, kw)
    out = tuple(patches.shape[2:5])
    return patches.permute(0, 2, 3, 4, 1, 5, 6, 7).reshape(x.shape[0], -1, patches[0, :, 0, 0, 0].numel()), out


def _col2vol(cols, shape, out, geometry):
    """The sum back into a volume of `shape` (N, C, T, H, W) of columns (N, T' * H' * W', C * kt * kh * kw)
    laid out as _vol2col's: every kernel offset's slice added in binary64, offsets in vol2col's order
    (unrounded: the caller rounds the sum once)."""
    kernel, dilation, padding, stride = geometry
    n, c = shape[:2]
    g = cols.detach().double().reshape(n, *out, c, *kernel).permute(0, 4, 1, 2, 3, 5, 6, 7)
    vol = torch.zeros(n, c, *(size + 2 * p for size, p in zip(shape[2:], padding)), dtype=torch.float64)
    for a in range(kernel[0]):
        for b in range(kernel[1]):
            for e in range(kernel[2]):
                at = [o * d for o, d in zip((a, b, e), dilation)]
                vol[:, :, at[0]:at[0] + stride[0] * (out[0] - 1) + 1:stride[0],
                    at[1]:at[1] + stride[1] * (out[1] - 1) + 1:stride[1],
                    at[2]:at[2] + stride[2] * (out[2] - 1) + 1:stride[2]] += g[..., a, b, e]
    return vol[:, :, padding[0]:padding[0] + shape[2], padding[1]:padding[1] + shape[3],
               padding[2]:padding[2] + shape[4]]


class _Unfold3d(torch.autograd.Function):
    """conv3d's columns (_vol2col); backward col2vol (_col2vol), the sum rounded once to the input's
    format (x_format; None: its dtype's), as conv2d's col2im."""

    @staticmethod
    def forward(ctx, x, geometry, x_format, cast=None):
        ctx.geometry, ctx.x_format, ctx.shape, ctx.dtype = geometry, x_format, x.shape, x.dtype
        cols, ctx.out = _vol2col(x if cast is None else torch.from_numpy(cast), geometry)  # as _Unfold's
        return cols

    @staticmethod
    def backward(ctx, grad):
        no_double_backward("conv3d's col2vol")
        dx = _col2vol(grad, ctx.shape, ctx.out, ctx.geometry)
        return round_tensor(dx, ctx.x_format or _OWN_FORMAT[ctx.dtype]).to(ctx.dtype), None, None, None


class _Fold3d(torch.autograd.Function):
    """col2vol of a transposed 3-D convolution's columns (N, T * H * W, C * kt * kh * kw) into
    (N, C, T', H', W') (_col2vol, binary64), the bias added in binary64, the sum rounded once to
    `fmt`; backward vol2col (a gather) and, for the bias, autograd's sum."""

    @staticmethod
    def forward(ctx, cols, bias, shape, out, geometry, fmt):
        ctx.geometry, ctx.bias = geometry, bias is not None
        y = _col2vol(cols, shape, out, geometry)
        if bias is not None:
            y = y + bias.detach().double().reshape(1, -1, 1, 1, 1)
        return round_tensor(y, fmt).to(cols.dtype)

    @staticmethod
    def backward(ctx, grad):
        no_double_backward("conv_transpose3d's col2vol")
        dcols, _ = _vol2col(grad, ctx.geometry)
        return dcols, grad.sum((0, 2, 3, 4)) if ctx.bias else None, None, None, None, None


def conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, model=None, *, config=None):
    """F.conv3d as ATen's CPU kernel (slow_conv3d) runs it: vol2col columns times the weight's
    transpose, each group's columns times its output channels' (the op core's grouped GEMM, each
    group's slice of the bias in its epilogue); the input gradient's col2vol in binary64, rounded
    once (_Unfold3d)."""
    x, padding = _numeric_padding(x, weight, padding, stride, dilation, _triple)
    cfg, x, unbatched = _prologue(x, weight, bias, model, config)
    n = x.shape[0]
    oc, _, *kernel = weight.shape
    geometry = (tuple(kernel), _triple(dilation), _triple(padding), _triple(stride))
    sizes = [(i + 2 * p - d * (k - 1) - 1) // s + 1
             for i, k, d, p, s in zip(x.shape[2:], kernel, *geometry[1:])]
    cast, a_format = _cast_input(x, cfg)
    cols = _Unfold3d.apply(x, geometry, cfg.x_format, cast)  # (N, L, C * kt * kh * kw), channel first
    gcfg = _bias_telemetry(_telemetry(cfg, weight, lambda m, s=weight.shape: m[0].t().reshape(s),
                                      lambda m: _conv_output_mask(m, (n, oc, *sizes))), bias)
    y = _gemm(cols, weight.reshape(oc, -1).t().unsqueeze(0), gcfg, bias=bias, fold=True, groups=groups,
              column_major=True, a_format=a_format)  # as conv2d's
    y = y.reshape(n, cols.shape[1], oc).transpose(1, 2).reshape(n, oc, *sizes).contiguous()  # as conv2d's
    return y.squeeze(0) if unbatched else y


def _triple(v):
    return (v, v, v) if isinstance(v, int) else tuple(v)


def conv_transpose3d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                     model=None, *, config=None):
    """F.conv_transpose3d as the input gradient of a conv3d (ATen's CPU slow_conv_transpose3d: a GEMM
    and col2vol): all groups in one call of the op core's grouped GEMM, each group's voxels (N * T * H *
    W, C_in/groups) times its weight rows (C_in/groups, C_out/groups * kt * kh * kw), the columns (in the GEMM's output format) summed into
    the output by col2vol in binary64, the bias added there, the sum rounded once to the GEMM's
    output format (_Fold3d), as conv_transpose2d."""
    cfg, x, unbatched = _prologue(x, weight, bias, model, config)
    n, _, *spatial = x.shape
    _, ocg, *kernel = weight.shape
    stride, padding, dilation, extra = _triple(stride), _triple(padding), _triple(dilation), _triple(output_padding)
    size = tuple((i - 1) * s - 2 * p + d * (k - 1) + e + 1
                 for i, s, p, d, k, e in zip(spatial, stride, padding, dilation, kernel, extra))
    geometry = (tuple(kernel), dilation, padding, stride)
    fmt = cfg.op.output_format(cfg.a_format or _dtype_format(x)) if getattr(cfg, "op", None) else _dtype_format(x)
    shape = (n, ocg * groups) + size
    b, to_weight = _rows_side_by_side(weight, groups)
    gcfg = _telemetry(cfg, weight, to_weight,
                      lambda m: _col2vol(m.reshape(n, -1, m.shape[-1]).double(), shape, tuple(spatial),
                                         geometry) > 0)
    cols = _gemm(x.flatten(2).transpose(1, 2), b.unsqueeze(0), gcfg, fold=True, groups=groups)
    y = _Fold3d.apply(cols.reshape(n, -1, b.shape[1]), bias, shape, tuple(spatial), geometry, fmt)
    return y.squeeze(0) if unbatched else y
