"""The op table's layers without a GEMM (layer_norm, gelu) on rpsim's own kernels: F.layer_norm and
F.gelu inside rpsim.torch.emulate run the C++ LayerNorm and GELU layers of `rpsim train` (built by
their op-table rows, rpsim._core._TorchLayer), so their sums, erf and roundings are the CLI's bits
(PyTorch's own kernels vectorise the row sums and evaluate erf in float, a few ulps away). A call
those layers do not express (LayerNorm over several dimensions, another eps, no affine
parameters, GELU's tanh approximation) returns None: it takes the binary32 path."""
import torch

from .. import _core
from ._quantize import quantize, round_tensor
from ._scaler import _readable
from ._tables import LAYER_KERNELS  # noqa: F401 (torch function name -> op-table row: the C++ table's)
from ._unsupported import no_double_backward


def _at_least_float32(dtype):
    """A result's dtype: a half or bfloat16 input's output may hold a wider format (binary32)."""
    return torch.promote_types(dtype, torch.float32)


class _Layer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fmt, kernel, on_counts, *params):
        ctx.kernel, ctx.shape, ctx.dtype, ctx.on_counts = kernel, x.shape, x.dtype, on_counts
        ctx.param_shapes = [(p.shape, p.dtype) for p in params]
        # float32 or float64 as they lie (the kernel copies what it keeps, widening once).
        flat = _readable(x.detach().reshape(-1, x.shape[-1])).numpy()
        y, ctx.y_format = kernel.forward(flat, fmt, [_readable(p.detach().reshape(1, -1)).numpy() for p in params])
        return torch.from_numpy(y).reshape(x.shape).to(_at_least_float32(x.dtype))

    @staticmethod
    def backward(ctx, grad):
        no_double_backward("rpsim's C++ layer_norm / gelu")
        dx, flushed, grads, grads_flushed = ctx.kernel.backward(
            _readable(grad.detach().reshape(-1, ctx.shape[-1])).numpy(), ctx.y_format)
        if ctx.on_counts is not None:  # telemetry: the parameters' gradient roundings that flushed entries
            ctx.on_counts(grads_flushed)
        out = [torch.from_numpy(g).reshape(s).to(d) for g, (s, d) in zip(grads, ctx.param_shapes)]
        return (torch.from_numpy(dx).reshape(ctx.shape).to(ctx.dtype), None, None, None, *out)


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, in_fmt, compute, out_fmt):
        ctx.shape, ctx.dtype, ctx.formats = x.shape, x.dtype, (in_fmt, compute, out_fmt)
        s = x.detach().reshape(-1, x.shape[-1]).double().numpy()
        p = round_tensor(torch.from_numpy(_core._torch_softmax(s, compute)), out_fmt)
        ctx.saved = (p.numpy(), s)
        return p.reshape(x.shape).to(_at_least_float32(x.dtype))

    @staticmethod
    def backward(ctx, grad):
        no_double_backward("rpsim's softmax kernel")
        in_fmt, compute, out_fmt = ctx.formats
        p, s = ctx.saved
        dp = round_tensor(grad.detach().reshape(-1, ctx.shape[-1]).double(), out_fmt)  # to p's format
        ds = torch.from_numpy(_core._torch_softmax_backward(p, dp.numpy(), s, compute))
        ds = round_tensor(round_tensor(ds, out_fmt), in_fmt)
        return ds.reshape(ctx.shape).to(ctx.dtype), None, None, None


def _softmax(emulation, args, kwargs, fmt):
    x, dim = args[0], _arg(args, kwargs, 1, "dim")
    if dim is None or dim not in (-1, x.dim() - 1) or _arg(args, kwargs, 3, "dtype") is not None:
        return None
    r = emulation.rule("softmax")
    compute, out = (fmt, fmt) if r is None else (r["compute"], r["output"])
    return _Softmax.apply(x, fmt, compute, out)


def _arg(args, kwargs, i, key, default=None):
    return args[i] if len(args) > i else kwargs.get(key, default)


def run(emulation, name, args, kwargs, fmt):
    """The op on rpsim's kernel (input format fmt), or None where the layer cannot express it."""
    x = args[0]
    if name == "softmax":
        return _softmax(emulation, args, kwargs, fmt)
    if name == "gelu":
        if _arg(args, kwargs, 1, "approximate", "none") != "none":
            return None
        params = []
    else:
        shape, w, b = _arg(args, kwargs, 1, "normalized_shape"), _arg(args, kwargs, 2, "weight"), \
            _arg(args, kwargs, 3, "bias")
        if len(tuple(shape)) != 1 or w is None or b is None or _arg(args, kwargs, 4, "eps", 1e-5) != 1e-5:
            return None
        params = [w, b]
    kernel = _core._TorchLayer(LAYER_KERNELS[name], emulation.policy_spec, x.shape[-1])
    on_counts = None
    if params and emulation.telemetry:
        def on_counts(counts):
            for p, n in zip(params, counts):
                emulation.flushes.param_count(p, n)
    return _Layer.apply(x, fmt, kernel, on_counts, *params)


def embedding_args(emulation, args):
    """F.embedding's args with its weight passed through a rounding whose backward rounds this use's
    weight gradient to the embedding rule's output format (the CLI's Embedding rounds its table's
    gradient so before the tied lm_head's gradient is added; the forward rounding is exact: the
    table is stored in that format or a narrower one)."""
    r = emulation.rule("embedding")
    fmt = emulation._storage() if r is None else r["output"]
    if len(args) < 2 or fmt in ("binary32", "binary64"):
        return args
    return (args[0], quantize(args[1], fmt, "rne", backward_format=fmt), *args[2:])
