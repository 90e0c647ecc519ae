"""rpsim.torch.GradScaler: torch.cuda.amp.GradScaler's API over rpsim's loss-scaler table (the C++
scalers `rpsim scaler` and `rpsim train` step), so a PyTorch loop on the CPU follows DeepSpeed's,
Megatron's, Apex's, Keras' or PyTorch's own loss scaling step for step."""
import math

import torch

from .. import _core
from ._quantize import round_tensor


def _grads(optimizer):
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                yield p


class GradScaler:
    """GradScaler(policy="deepspeed", **params): params by the loss-scaler field names configs use
    (init_scale, growth_factor, backoff_factor, growth_interval, hysteresis,
    consecutive_hysteresis, min_scale, max_scale, raise_at_min_scale); unset ones take the
    policy's upstream default; an unknown policy or a parameter it does not read raises ValueError.

    scale(loss) multiplies by the current scale; unscale_(optimizer) multiplies the gradients by
    binary32(1 / scale) and looks for inf/NaN; step(optimizer) skips optimizer.step() where the
    framework's scaler skips that step; update() moves the scale as the framework does."""

    def __init__(self, policy="deepspeed", enabled=True, **params):
        self._policy_arg, self._params = policy, dict(params)
        self._enabled = enabled
        if not isinstance(policy, str):
            raise TypeError(f"policy: {type(policy).__name__} is not a name of the loss-scaler table "
                            f"({', '.join(_core._torch_loss_scalers())})")
        self._scaler = _core._LossScaler(policy, **params)
        self._events = []  # found_inf of every update(): state_dict replays them
        self._scale_tensor = (None, None)
        self.count_flushed = False  # rpsim.torch.Trainer's underflow columns: entries unscale_ flushed
        self._reset_step()

    def _reset_step(self):
        self._unscaled = {}  # id(optimizer) -> found_inf
        self.flushed = {}  # id(parameter) -> mask of the entries unscale_ flushed to zero
        self._stepped = False

    @property
    def policy(self):
        return self._scaler.policy

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        """The scale this step's loss is multiplied by (1.0 when disabled)."""
        return self._scaler.scale() if self._enabled else 1.0

    def scale(self, outputs):
        if not self._enabled:
            return outputs
        s = self.get_scale()
        if isinstance(outputs, torch.Tensor):
            key = (s, outputs.dtype)
            if self._scale_tensor[0] != key:  # the scale as a tensor, made again only when it moves
                self._scale_tensor = (key, torch.tensor(s, dtype=outputs.dtype))
            return outputs * self._scale_tensor[1]
        return type(outputs)(self.scale(o) for o in outputs)

    def unscale_(self, optimizer):
        if not self._enabled:
            return
        if id(optimizer) in self._unscaled:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        # rpsim train's unscale: one binary32 reciprocal, each gradient multiplied by it (one rounding
        # to the gradient's dtype: the product of two binary32 values is exact in binary64, so
        # float32's own multiply rounds it the same), the inf/NaN check after.
        inv = float(torch.tensor(1.0 / self.get_scale(), dtype=torch.float32))
        found = False
        with torch.no_grad():
            for p in _grads(optimizer):
                if inv != 1.0:
                    nonzero = p.grad != 0 if self.count_flushed else None
                    fmt = getattr(p, "_rpsim_grad_format", None)  # set by rpsim.torch.emulate
                    if fmt not in (None, "binary32", "binary64") and p.grad.dtype == torch.float32:
                        # A gradient stored in a narrower format (fp16-pure, fixed point): the exact
                        # binary64 product rounded once to that format, as rpsim train's unscale.
                        p.grad.copy_(round_tensor(p.grad.double() * inv, fmt))
                    elif p.grad.dtype in (torch.float32, torch.float64):
                        p.grad.mul_(inv)
                    else:
                        p.grad.copy_((p.grad.double() * inv).to(p.grad.dtype))
                    # Gradients the unscale flushed to zero (rpsim.torch.Trainer's underflow columns).
                    if nonzero is not None:
                        self.flushed[id(p)] = nonzero & (p.grad == 0)
                # A sum over a tensor holding inf or NaN is never finite: one reduction without a
                # mask tensor; only a finite tensor whose sum overflows needs the exact check.
                found = found or (not math.isfinite(float(p.grad.sum()))
                                  and not bool(torch.isfinite(p.grad).all()))
        self._unscaled[id(optimizer)] = found

    def found_inf(self):
        """Whether any optimizer unscaled since the last update() had an inf/NaN gradient."""
        return any(self._unscaled.values())

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless the scaler skips this step (returns None then)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        self._stepped = True
        if self._scaler.skips(self._unscaled[id(optimizer)]):
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """The scaler's update with this step's overflow flag: the scale for the next step."""
        if not self._enabled:
            return
        if new_scale is not None:
            raise ValueError("update(new_scale): rpsim's scalers move the scale by their framework's rule only")
        found = self.found_inf()
        self._scaler.update(found)
        self._events.append(found)
        self._reset_step()

    def state(self):
        """The scaler's counters as upstream keeps them (as meta.json's loss_scaler.state)."""
        return self._scaler.state()

    def state_dict(self):
        return {"policy": self._policy_arg, "params": dict(self._params), "events": list(self._events),
                "scale": self.get_scale(), "enabled": self._enabled}

    def load_state_dict(self, state):
        """Rebuilds the scaler from its policy and parameters and replays the overflow history, so
        every counter is as it was (the C++ scalers keep no other state)."""
        for key in ("policy", "params", "events"):
            if key not in state:
                raise ValueError(f"state_dict: key '{key}' missing (not a rpsim.torch.GradScaler state)")
        self.__init__(state["policy"], state.get("enabled", True), **state["params"])
        for found in state["events"]:
            self._scaler.update(bool(found))
            self._events.append(bool(found))

    def __repr__(self):
        return f"<rpsim.torch.GradScaler {self.policy}: scale {self.get_scale():g}, {self.state()}>"
