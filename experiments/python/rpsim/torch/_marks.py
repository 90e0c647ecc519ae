"""The bookkeeping rpsim.torch.emulate keeps on tensors: the format a tensor's values are in (its
mark), PyTorch's type promotion over those formats, walks over nested arguments, and running an op
of a float16 or bfloat16 model on float32 copies (PyTorch 1.13's CPU kernels lack most half ops)."""
import functools

import torch

from .. import _core

WIDE = {"binary32", "binary64"}
NARROW_DTYPES = (torch.float16, torch.bfloat16)


def format_of(t, default):
    """The format t's values are in: its mark, else its base's where t is a view made out of the
    emulation's sight (PyTorch 1.13's TorchFunctionMode does not see x[0], x[1:] or x[i] with an
    integer: their views hold their base's values), else `default`."""
    fmt = getattr(t, "_rpsim_format", None)
    if fmt is None:
        base = t._base
        fmt = getattr(base, "_rpsim_format", None) if base is not None and base.dtype == t.dtype else None
    return default if fmt is None else fmt


def mark(t, fmt):
    if isinstance(t, torch.Tensor) and t.is_floating_point():
        try:
            t._rpsim_format = fmt
        except (AttributeError, RuntimeError):
            pass
    return t


@functools.lru_cache(maxsize=None)
def promote(a, b):
    """PyTorch's type promotion over the formats rpsim tracks: the op core's rule (the one that holds
    the other, else binary32, else binary64), as rpsim train's layers promote."""
    return a if a == b else _core._promote_formats(a, b)


def tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from tensors(o)


def map_tensors(fn, obj):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple (a PackedSequence): by position
        return type(obj)(*(map_tensors(fn, o) for o in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_tensors(fn, o) for o in obj)
    return obj


def name_of(func):
    """The name the tables know func by: an overload called directly (torch.ops.aten.unsqueeze.default,
    as torchvision's RAFT reaches it) by its op's name, "unsqueeze", not "unsqueeze.default"."""
    return getattr(getattr(func, "overloadpacket", func), "__name__", None) or str(func)


def run_widened(func, args, kwargs):
    """func(*args, **kwargs) with its float16 and bfloat16 tensors passed as float32 copies (exact:
    PyTorch 1.13 on the CPU has no half relu, gelu, softmax, batch_norm, max_pool2d ...). A tensor
    the op changed in place (BatchNorm's running statistics, an in-place ReLU) gets the new values
    back, and where the op returned that copy it returns the tensor itself."""
    copies = []

    def widen(t):
        if t.dtype in NARROW_DTYPES:
            w = t.float()
            copies.append((w, t, w._version))
            return w
        return t
    wide_args = map_tensors(widen, args)
    wide_kwargs = {k: map_tensors(widen, v) for k, v in kwargs.items()}
    if not copies:
        return func(*args, **kwargs)
    out = func(*wide_args, **wide_kwargs)
    back = {}
    for w, t, version in copies:
        # (a kernel's own update of a buffer, as batch_norm's of its running statistics, leaves the
        # version counter alone: a tensor outside autograd is compared instead)
        if w._version != version or (not w.requires_grad and not torch.equal(w.to(t.dtype), t)):
            t.copy_(w)
            back[id(w)] = t
    return map_tensors(lambda o: back.get(id(o), o), out)


_DTYPE_FORMATS = {torch.float16: "binary16", torch.bfloat16: "bfloat16", torch.float32: "binary32",
                  torch.float64: "binary64"}


def holds(dtype, fmt):
    """Whether every value of format `fmt` is a value of `dtype`: no more significand bits, no larger
    finite value, no smaller positive one (a fixed-point format: its step and range)."""
    if dtype == torch.float64 or fmt == _DTYPE_FORMATS.get(dtype):
        return True
    f, d = _core.format_info(fmt), _core.format_info(_DTYPE_FORMATS[dtype])
    return f["man_bits"] <= d["man_bits"] and f["max_finite"] <= d["max_finite"] and \
        f["min_positive"] >= d["min_positive"]
