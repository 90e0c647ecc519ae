"""The FP64 shadow's loss: the user's loss function on the shadow's float64 output, with the narrower
floating-point tensors it makes itself (F.one_hot(y, n).float(), torch.ones(n)) taken to float64
wherever they meet a float64 one. PyTorch 1.13 promotes a float32 target against a float64 output in
the forward, but the backward of some kernels refuses the pair ("Found dtype Float but expected
Double": mse_loss, huber_loss), so a loss written for the user's float32 model stopped the step under
the shadow. The values are the same either way; the shadow's loss is then binary64 throughout."""
import torch
from torch.overrides import TorchFunctionMode

from ._marks import map_tensors, name_of, tensors

_NARROW = (torch.float32, torch.float16, torch.bfloat16)


def _widened(t):
    return t.double() if t.dtype in _NARROW else t


class _Binary64Meets(TorchFunctionMode):
    """Calls whose floating-point tensor arguments mix float64 with narrower ones get float64 copies
    of the narrower. An in-place call (add_, __setitem__, __iadd__, out=) is left as it is: a copy
    would take the change away from the tensor the caller holds."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = name_of(func)
        if not (name.endswith("_") or name.startswith("__i") or name == "__setitem__" or "out" in kwargs):
            dtypes = {t.dtype for t in tensors((args, kwargs)) if t.is_floating_point()}
            if torch.float64 in dtypes and dtypes & set(_NARROW):
                args = map_tensors(_widened, args)
                kwargs = {k: map_tensors(_widened, v) for k, v in kwargs.items()}
        return func(*args, **kwargs)


def binary64_loss(loss_fn):
    """loss_fn run under _Binary64Meets (the shadow's loss: Trainer's shadow_loss_fn)."""
    def shadow_loss(out, y):
        with _Binary64Meets():
            return loss_fn(out, y)
    shadow_loss.__wrapped__ = loss_fn
    return shadow_loss
