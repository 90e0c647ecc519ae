"""The FP64 shadow's pieces that are not the op core's: its copy of the model and its loss.

shadow_copy: copy.deepcopy(model).double(), also where a forward pre-hook keeps a computed tensor as a
plain attribute (nn.utils.weight_norm's weight: a non-leaf tensor, which deepcopy refuses, so every
such model stopped at Trainer(...) with "Only Tensors created explicitly by the user (graph leaves)
support the deepcopy protocol"). The copy gets a detached copy of it; the hook makes it again from the
copy's own float64 parameters at each forward.

same_draws: the shadow's forward draws what the emulated one drew from the generator (dropout's
masks, a VAE's noise), and the generator then goes on from where the emulated forward left it, as
in a run without the shadow. Different masks made the distance from FP64 the masks' (a 3% loss gap under the fp64
policy itself).

binary64_loss: the user's loss function on the shadow's float64 output, with the narrower
floating-point tensors it makes itself (F.one_hot(y, n).float(), torch.ones(n)) taken to float64
wherever they meet a float64 one. PyTorch 1.13 promotes a float32 target against a float64 output in
the forward, but the backward of some kernels refuses the pair ("Found dtype Float but expected
Double": mse_loss, huber_loss), so a loss written for the user's float32 model stopped the step under
the shadow. The values are the same either way; the shadow's loss is then binary64 throughout.
Binary64Meets also runs inside each forward under binary64 data (the shadow's, the fp64 policy's):
float32 tensors a forward makes itself (torch.eye(2, 3) as affine_grid's theta, a torch.ones mask) met
the shadow's float64 activations, and grid_sample stopped the step ("expected scalar type Double but
found Float")."""
import contextlib
import copy
import itertools

import torch
from torch.overrides import TorchFunctionMode

from ._marks import map_tensors, name_of

_NARROW = (torch.float32, torch.float16, torch.bfloat16)


def _widened(t):
    return t.double() if t.dtype in _NARROW else t


class Binary64Meets(TorchFunctionMode):
    """Calls whose floating-point tensor arguments mix float64 with narrower ones get float64 copies
    of the narrower. An in-place call (add_, __setitem__, __iadd__, out=) is left as it is: a copy
    would take the change away from the tensor the caller holds. (Every op of a forward passes here:
    the dtypes are read from the arguments and one level of lists; a walk through every argument's
    structure cost the shadow's GPT step 6%.)

    draws (the shadow's: the emulated model's dtype): torch.randn_like(mu), torch.rand_like(x),
    t.normal_(), t.uniform_() on float64 tensors drawn in that dtype and widened. PyTorch's CPU
    generator gives float32 and float64 different numbers from one state (torch.rand(8) and
    torch.rand(8, dtype=torch.float64) share none), so a VAE's reparameterisation noise differed between
    the model and its shadow and the distance from FP64 measured the noise. Draws of an explicit dtype,
    and factories of the default one, are left alone. (A mode of its own around the shadow's whole step
    saw every op of the backward too: the GPT step with the shadow took 12% longer.)"""

    def __init__(self, draws=None):
        super().__init__()
        self.draws = draws

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.draws is not None and func in _DRAWS and args and _float64(args[0]):
            x, kind = args[0], _DRAWS[func]
            if kind == "like" and kwargs.get("dtype") is None:
                return func(x, *args[1:], **{**kwargs, "dtype": self.draws}).double()
            if kind == "in place":
                return x.copy_(func(torch.empty_like(x, dtype=self.draws), *args[1:], **kwargs))
        if _mixed(args) or (kwargs and _mixed(kwargs.values())):
            name = name_of(func)
            if not (name.endswith("_") or name.startswith("__i") or name == "__setitem__" or "out" in kwargs):
                args = map_tensors(_widened, args)
                kwargs = {k: map_tensors(_widened, v) for k, v in kwargs.items()}
        return func(*args, **kwargs)


_DRAWS = {torch.randn_like: "like", torch.rand_like: "like", torch.Tensor.normal_: "in place",
          torch.Tensor.uniform_: "in place"}


def _float64(x):
    return isinstance(x, torch.Tensor) and x.dtype == torch.float64


def _mixed(values):
    """Whether `values` (and the lists among them: torch.cat's) hold float64 and narrower floating tensors."""
    dtypes = set()
    for v in values:
        if isinstance(v, torch.Tensor):
            dtypes.add(v.dtype)
        elif isinstance(v, (list, tuple)):
            dtypes.update(t.dtype for t in v if isinstance(t, torch.Tensor))
    return torch.float64 in dtypes and not dtypes.isdisjoint(_NARROW)


def binary64_loss(loss_fn):
    """loss_fn run under Binary64Meets (the shadow's loss: Trainer's shadow_loss_fn)."""
    def shadow_loss(out, y):
        with Binary64Meets():
            return loss_fn(out, y)
    shadow_loss.__wrapped__ = loss_fn
    return shadow_loss


def shadow_copy(model):
    """The shadow's float64 copy of model (the module docstring)."""
    held = [(m, k, v) for m in model.modules() for k, v in vars(m).items()
            if isinstance(v, torch.Tensor) and v.grad_fn is not None]
    for m, k, v in held:
        setattr(m, k, v.detach())
    try:
        return copy.deepcopy(model).double()
    finally:
        for m, k, v in held:
            setattr(m, k, v)


def same_modes(model, shadow):
    """Each shadow module in its model module's train/eval mode, each shadow parameter frozen where the
    model's is: a BatchNorm the user set to eval() (frozen statistics), a dropout turned off or a layer
    frozen after Trainer() made the copy ran as before in the shadow, and the distance from FP64 measured
    the modes (step 0's losses 1.090 against 1.008)."""
    for m, s in zip(model.modules(), shadow.modules()):
        s.training = m.training
    for p, q in zip(model.parameters(), shadow.parameters()):
        q.requires_grad_(p.requires_grad)


def same_hyperparameters(opt, shadow_opt):
    """The shadow optimizer's param groups given the model optimizer's lr, weight decay, momentum ...: a
    loop that sets trainer.optimizer.param_groups[i]["lr"] itself (a hand-written warmup) left the
    shadow's at its first values."""
    for g, s in zip(opt.param_groups, shadow_opt.param_groups):
        s.update((k, v) for k, v in g.items() if k != "params")


def versions(model):
    """The version counters of model's parameters and buffers: any in-place write moves one."""
    return [t._version for t in itertools.chain(model.parameters(), model.buffers())]


def written_since(model, shadow, before):
    """The parameters and buffers of model written since `before` (versions(model) at the end of the last
    step) outside Trainer's steps -- model.load_state_dict(checkpoint) after Trainer(), an edit under
    no_grad -- copied into the shadow (None: none) in float64: the shadow kept the weights it was made
    with (step 0's losses 2.147 against 0.942 after a checkpoint). Whether a parameter was among them."""
    n, written = len(list(model.parameters())), False
    own = itertools.chain(model.parameters(), model.buffers())
    theirs = itertools.chain(shadow.parameters(), shadow.buffers()) if shadow is not None else itertools.repeat(None)
    for i, (t, s, v) in enumerate(zip(own, theirs, before)):
        if t._version != v:
            written |= i < n
            if s is not None:
                with torch.no_grad():
                    s.copy_(t)
    return written


@contextlib.contextmanager
def same_draws(state):
    """The block runs from the generator's `state` (torch.get_rng_state() before the emulated forward);
    the generator's state from before the block is back afterwards (the module docstring)."""
    after = torch.get_rng_state()
    torch.set_rng_state(state)
    try:
        yield
    finally:
        torch.set_rng_state(after)
