"""rpsim.torch.quantize: the core's array rounding (rpsim.round) as an autograd function."""
import torch

from .. import _core
from ._unsupported import COMPLEX_FIX, UnsupportedError, no_double_backward

# The dtypes rpsim.torch reads: float32 and float64 pass to the core without a copy (a contiguous
# tensor's storage is the array the core rounds into); float16 and bfloat16 are widened to
# float32 (exact) and the result cast back.
ACCEPTED = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_ACCEPTED_TEXT = "CPU tensors of dtype float32, float64, float16 or bfloat16"


def check_tensor(x, what="x", cuda=False):
    """TypeError unless `x` is a CPU floating tensor of a dtype rpsim.torch reads (cuda: or a CUDA
    one, where rpsim's CUDA backend was built and a device answers); UnsupportedError for a complex one."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{what}: {type(x).__name__} is not a torch.Tensor ({_ACCEPTED_TEXT})")
    # is_cpu, not device.type: a tenth of the cost, and this runs on every rounding of a step.
    if not x.is_cpu and not (cuda and x.is_cuda and _cuda_available()):
        why = f"; rpsim's CUDA backend {_cuda_missing()}" if cuda and x.is_cuda else ""
        raise TypeError(f"{what}: a tensor on {x.device}; rpsim.torch emulates on the CPU and takes "
                        f"{_ACCEPTED_TEXT} (move it with x.cpu()){why}")
    if x.is_complex():  # (not a TypeError: x @ w turns one into "unsupported operand type(s) for @")
        raise UnsupportedError(f"{what}: a {str(x.dtype)[6:]} tensor: rpsim's formats and GEMMs are real; "
                               + COMPLEX_FIX)
    if x.dtype not in ACCEPTED:
        raise TypeError(f"{what}: dtype {x.dtype} is not supported; rpsim.torch takes {_ACCEPTED_TEXT}")


_OWN_FORMAT = {torch.float64: "binary64", torch.float32: "binary32"}


def _cuda_available():
    return bool(_core._cuda_built()) and _core._cuda_device_count() > 0


def _cuda_missing():
    return "is not built (no nvcc when rpsim was built)" if not _core._cuda_built() else "finds no CUDA device"


def _round_on_cuda(src, fmt, rounding, seed, stream, options):
    """src (float32 or float64, contiguous, on a CUDA device) rounded by rpsim's CUDA backend
    (rpsim_cuda_round: the CPU core's bits, element i drawing counter_random(seed, stream, i)),
    queued on the device's current stream."""
    out = torch.empty_like(src)
    dtype = "float64" if src.dtype == torch.float64 else "float32"
    saturate = options.get("saturate")
    _core._cuda_round(fmt, src.data_ptr(), dtype, out.data_ptr(), dtype, src.numel(),
                      torch.cuda.current_stream(src.device).cuda_stream, rounding=rounding, seed=seed,
                      stream_id=stream, ftz=bool(options.get("ftz")), daz=bool(options.get("daz")),
                      overflow="" if saturate is None else "saturate" if saturate else "infinity",
                      stochastic_bits=int(options.get("stochastic_bits") or 0))
    return out


def round_tensor(x, fmt, rounding="rne", seed=0, stream=0, **options):
    """x (no autograd) rounded to `fmt`, a new tensor of x's dtype; the core's keywords in options
    (stochastic_bits, ftz, daz, saturate). A CUDA tensor rounds on rpsim's CUDA backend."""
    check_tensor(x, cuda=True)
    on_cuda, src = x.is_cuda, x.detach()
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
    if on_cuda and src.numel():
        out = _round_on_cuda(src, fmt, rounding, seed, stream, options)
        return out.to(x.dtype) if wide else out
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
    stream + 1). Unknown formats or roundings raise ValueError naming them; an unsupported dtype
    raises TypeError, and so does a CUDA tensor unless rpsim's CUDA backend is built and finds a
    device: there it rounds on the device (rpsim.torch.backends()), the CPU's bits."""
    check_tensor(x, cuda=True)
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
