"""rpsim.torch.quantize: the core's array rounding (rpsim.round) as an autograd function."""
import torch

from .. import _core
from ._unsupported import no_double_backward

# The dtypes rpsim.torch reads: float32 and float64 pass to the core without a copy (a contiguous
# tensor's storage is the array the core rounds into); float16 and bfloat16 are widened to
# float32 (exact) and the result cast back.
ACCEPTED = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_ACCEPTED_TEXT = "CPU tensors of dtype float32, float64, float16 or bfloat16"


def check_tensor(x, what="x"):
    """TypeError unless `x` is a CPU floating tensor of a dtype rpsim.torch reads."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{what}: {type(x).__name__} is not a torch.Tensor ({_ACCEPTED_TEXT})")
    # is_cpu, not device.type: a tenth of the cost, and this runs on every rounding of a step.
    if not x.is_cpu:
        raise TypeError(f"{what}: a tensor on {x.device}; rpsim.torch emulates on the CPU and takes "
                        f"{_ACCEPTED_TEXT} (move it with x.cpu())")
    if x.dtype not in ACCEPTED:
        raise TypeError(f"{what}: dtype {x.dtype} is not supported; rpsim.torch takes {_ACCEPTED_TEXT}")


_OWN_FORMAT = {torch.float64: "binary64", torch.float32: "binary32"}


def round_tensor(x, fmt, rounding="rne", seed=0, stream=0, **options):
    """x (no autograd) rounded to `fmt`, a new tensor of x's dtype; the core's keywords in options
    (stochastic_bits, ftz, daz, saturate)."""
    check_tensor(x)
    src = x.detach()
    if src.is_sparse:  # nn.Embedding(sparse=True)'s gradient: its entries, duplicates summed first
        src = src.coalesce()
        values = round_tensor(src._values(), fmt, rounding, seed, stream, **options)
        return torch.sparse_coo_tensor(src._indices(), values, src.shape)
    if _OWN_FORMAT.get(src.dtype) == fmt and not any(options.values()):
        return src.clone()  # binary64 of a float64 tensor (the shadow's every rounding): each value itself
    wide = src.dtype in (torch.float16, torch.bfloat16)
    if wide:
        src = src.float()
    src = src.contiguous()
    out = torch.empty_like(src)
    if src.numel():
        _core.round(src.numpy(), fmt, rounding, seed=seed, stream=stream, out=out.numpy(), **options)
    else:  # still checks the format and rounding names
        _core.round_scalar(0.0, fmt, rounding, seed=seed, stream=stream, **options)
    return out.to(x.dtype) if wide else out


class _Quantize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, forward_args, backward_args):
        ctx.backward_args = backward_args
        return round_tensor(x, *forward_args[:4], **forward_args[4])

    @staticmethod
    def backward(ctx, grad):
        if ctx.backward_args is None:
            return grad, None, None  # straight through
        no_double_backward("quantize's rounding of the gradient")
        a = ctx.backward_args
        return round_tensor(grad, *a[:4], **a[4]), None, None


def quantize(x, format, rounding="rne", *, seed=0, stream=0, backward_format=None, backward_rounding=None,
             backward_stream=None, stochastic_bits=32, ftz=False, daz=False, saturate=None):
    """x rounded to `format` (any name or spec rpsim.round takes: binary16, bf16, e4m3, e5m10,
    fixed-point q8.7, exp=5,man=10,...), differentiable: the gradient passes straight through,
    or, with backward_format, is rounded to it (backward_rounding, default `rounding`).

    rounding: rne rna rtz rd ru rodd sr. sr draws counter_random(seed, stream, i) for element i of
    the contiguous tensor, as rpsim.round does (the gradient: stream backward_stream, default
    stream + 1). Unknown formats or roundings raise ValueError naming them; a CUDA tensor or an
    unsupported dtype raises TypeError."""
    check_tensor(x)
    opts = dict(stochastic_bits=stochastic_bits, ftz=ftz, daz=daz, saturate=saturate)
    fwd = (format, rounding, seed, stream, opts)
    bwd = None
    if backward_format is not None or backward_rounding is not None:
        bfmt = backward_format if backward_format is not None else format
        brnd = backward_rounding if backward_rounding is not None else rounding
        bstream = backward_stream if backward_stream is not None else stream + 1
        _core.round_scalar(0.0, bfmt, brnd, seed=seed, stream=bstream, **opts)  # bad names fail now
        bwd = (bfmt, brnd, seed, bstream, opts)
    return _Quantize.apply(x, fwd, bwd)
