"""rpsim.torch.GradScaler: torch.cuda.amp.GradScaler's API over rpsim's loss-scaler table (the C++
scalers `rpsim scaler` and `rpsim train` step), so a PyTorch loop on the CPU follows DeepSpeed's,
Megatron's, Apex's, Keras' or PyTorch's own loss scaling step for step."""

import torch

from .. import _core


def _dtype_format(t):
    return {torch.float64: "binary64", torch.float16: "binary16", torch.bfloat16: "bfloat16"}.get(t.dtype, "binary32")


def _writable(t):
    """(a float32/float64 contiguous tensor the core writes into, whether it is a copy to write back)."""
    if t.dtype in (torch.float32, torch.float64) and t.is_contiguous():
        return t, False
    return t.double().contiguous(), True


def _readable(t):
    """t's values as a float32/float64 C-contiguous tensor the core reads in place (no copy where t
    already is one; float16 and bfloat16 widen exactly to float32)."""
    if t.dtype not in (torch.float32, torch.float64):
        t = t.float()
    return t.contiguous()


def _grad_values(p):
    """p's gradient entries to unscale: the gradient itself, or a sparse gradient's values (coalesced
    first, as torch.cuda.amp.GradScaler does: nn.Embedding(sparse=True))."""
    if p.grad.is_sparse:
        if not p.grad.is_coalesced():
            p.grad = p.grad.coalesce()
        return p.grad._values()
    return p.grad


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
        # rpsim train's unscale (the op core's, sim/train step_ops.hpp): one binary32 reciprocal, each
        # gradient multiplied by it and rounded once to its stored format, the inf/NaN check after.
        params = list(_grads(optimizer))
        with torch.no_grad():
            grads = [_grad_values(p) for p in params]
            views = [_writable(g) for g in grads]
            formats = [getattr(p, "_rpsim_grad_format", None) or _dtype_format(p.grad) for p in params]
            # With count_flushed, the op core's masks of the entries the unscale flushed (rpsim.torch.Trainer's
            # underflow columns), in each gradient's shape.
            _, found, *masks = _core._unscale([v.numpy() for v, _ in views], self.get_scale(), formats,
                                              masks=self.count_flushed)
            for i, ((v, back), g) in enumerate(zip(views, grads)):
                if back:
                    g.copy_(v)
                if masks:
                    self.flushed[id(params[i])] = torch.from_numpy(masks[0][i])
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
