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


def logged(log, layer, kind):
    """Entries flushed in `layer` (log: Emulation.flush_log): a grouped layer's weight gradients
    sum over the modules inside it; its activation gradient is its own output's."""
    if kind == "weight":
        return sum(v.get(kind, 0) for k, v in log.items() if k == layer or k.startswith(layer + "."))
    return log.get(layer, {}).get(kind, 0)


class Grabber:
    """The gradient arriving at each tracked layer's output (its activation gradient)."""

    def __init__(self, layers):
        self.grads = {}
        self.hooks = [m.register_forward_hook(self._hook(name)) for name, m in layers]

    def _hook(self, name):
        def fwd(module, args, out):
            if isinstance(out, torch.Tensor) and out.requires_grad:
                fmt = getattr(out, "_rpsim_format", None) if getattr(module, "_rpsim_group", False) else None
                out.register_hook(lambda g: self.grads.__setitem__(name, _as_arriving(fmt, g)))
        return fwd


def _as_arriving(fmt, g):
    """The gradient a layer of rpsim_layers receives (fmt: its output's format): its output's
    rounding (the emulation's last op in it, e.g. a residual add) rounds it to that format in
    backward after this hook sees it."""
    if fmt not in (None, "binary32", "binary64"):
        return round_tensor(g.detach(), fmt)
    return g.detach()
