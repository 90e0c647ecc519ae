"""rpsim.torch.Trainer's layers: the modules whose parameters make one layer of steps.csv, as
`rpsim train`'s telemetry groups them, and the gradient arriving at each one's output."""
import torch

from ._quantize import round_tensor


def layers(model):
    """(name, module) of every module that owns parameters itself: the CLI's layers with parameters.
    A model with an rpsim_layers list (module names) names its layers itself, each with every
    parameter inside it (rpsim train's gpt: wte, h<i>_attn, h<i>_mlp, ln_f)."""
    names = getattr(model, "rpsim_layers", None)
    if names is not None:
        modules = dict(model.named_modules())
        unknown = [n for n in names if n not in modules]
        if unknown:
            raise ValueError(f"rpsim_layers: no module named {unknown[0]!r} in the model")
        for n in names:
            modules[n]._rpsim_group = True
        return [(n, modules[n]) for n in names]
    return [(name or type(m).__name__, m) for name, m in model.named_modules()
            if any(True for _ in m.parameters(recurse=False))]


def params(module):
    """A layer's parameters: its own, or every one inside it for a layer of rpsim_layers."""
    return list(module.parameters(recurse=getattr(module, "_rpsim_group", False)))


def trainable(module):
    """A layer's parameters that train (requires_grad): a frozen one has no gradient to count."""
    return [p for p in params(module) if p.requires_grad]


class Grabber:
    """The gradient arriving at each tracked layer's output (its activation gradient): the module's
    output, or the first item of a tuple it returns (nn.MultiheadAttention, nn.LSTM); a module called
    several times in a step (a shared layer) gives one gradient per call, taken together."""

    def __init__(self, layers):
        self.grads = {}
        self.hooks = [m.register_forward_hook(self._hook(name)) for name, m in layers]

    def _hook(self, name):
        def fwd(module, args, out):
            out = out[0] if isinstance(out, (tuple, list)) and out else out
            if isinstance(out, torch.Tensor) and out.requires_grad:
                fmt = getattr(out, "_rpsim_format", None) if getattr(module, "_rpsim_group", False) else None
                out.register_hook(lambda g: self.grads.setdefault(name, []).append(_as_arriving(fmt, g)))
        return fwd

    def get(self, name):
        """The layer's activation gradient this step (None: none arrived): one call's as it is, several
        calls' flattened and joined."""
        grads = self.grads.get(name)
        if not grads:
            return None
        return grads[0] if len(grads) == 1 else torch.cat([g.reshape(-1) for g in reversed(grads)])


def _as_arriving(fmt, g):
    """The gradient a layer of rpsim_layers receives (fmt: its output's format): its output's
    rounding (the emulation's last op in it, e.g. a residual add) rounds it to that format in
    backward after this hook sees it."""
    if fmt not in (None, "binary32", "binary64"):
        return round_tensor(g.detach(), fmt)
    return g.detach()
