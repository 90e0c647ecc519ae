"""Gradient accumulation for rpsim.torch.Trainer, as `rpsim train` runs it (sim/train trainer.cpp
accumulated_backward, grad_accum.cpp; DeepSpeed's engine): a step's batch in micro-batches of a fixed
size (a short batch gives fewer), each micro-batch's loss seeded with binary32(scale / k) (DeepSpeed
divides the loss by gradient_accumulation_steps before the loss scaler multiplies it; the FP64
shadow: 1 / k), the step's loss the mean of theirs, the gradients summed across them by the op
core's accumulate_gradient in the accumulation format (the shadow's in binary64 by autograd, exact
as the CLI's), the underflow counts the micro-batches' mean (integer division), the
activation-gradient columns the last micro-batch's."""
import torch

from .. import _core


def check_steps(k):
    """ValueError for gradient_accumulation_steps out of range."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"gradient_accumulation_steps: {k!r} is not a number of micro-batches >= 1")


def sum_gradients(model, sums, fmt, flushes):
    """The micro-batch's gradients into the step's sums (the op core's accumulate_gradient: the first
    cast to `fmt`, later ones added in binary64 and rounded once, as rpsim train's accumulator), their
    flushes counted for the micro-batch; the gradients cleared for the next micro-batch."""
    for first in (True, False):
        ps = [p for p in model.parameters() if p.grad is not None and (id(p) not in sums) == first]
        grads = [(p.grad.detach() if p.grad.dtype in (torch.float32, torch.float64) else p.grad.float()).contiguous()
                 for p in ps]
        for p, g in zip(ps, grads):
            sums.setdefault(id(p), torch.empty(g.shape, dtype=g.dtype))
        flushed = _core._accumulate_gradients([sums[id(p)].numpy() for p in ps], [g.numpy() for g in grads],
                                              [fmt] * len(ps), first)
        for p, n in zip(ps, flushed):
            flushes.param_count(p, n)
            p.grad = None


def samples(x):
    """The batch's length: x's, or its first entry's (a tuple of arguments, a dict of keyword ones)."""
    first = x if isinstance(x, torch.Tensor) else next(iter(x.values() if isinstance(x, dict) else x))
    return first.shape[0]


def split(x, y, size):
    """(x, y) in micro-batches of `size` samples along the first dimension: x a tensor, a tuple/list or
    a dict (tensors of the batch's length sliced, other entries kept), y one target per sample or
    (flattened) per token."""
    n = samples(x)
    per = y.shape[0] // n if y.shape[0] != n else 1

    def part(t, s):
        return t[s:s + size] if isinstance(t, torch.Tensor) and t.dim() and t.shape[0] == n else t
    out = []
    for s in range(0, n, size):
        if isinstance(x, dict):
            xm = {k: part(v, s) for k, v in x.items()}
        elif isinstance(x, (tuple, list)):
            xm = type(x)(part(v, s) for v in x)
        else:
            xm = part(x, s)
        out.append((xm, y[s * per:(s + size) * per]))
    return out


def seed(scale, k):
    """The gradient seed of each of k micro-batches: binary32(scale / k) (k = 1: the scale itself)."""
    return scale if k == 1 else _core.round_scalar(scale / k, "binary32")["value"]


class Accumulation:
    """Trainer's micro-batch steps (a mixin: the Trainer's model, emulation, grabbers, loss)."""

    def _micro_batches(self, x, y):
        """The step's micro-batches (one without accumulation): of the first batch's size / k."""
        if self.accumulation_steps == 1:
            return [(x, y)]
        if self._micro_size is None:
            n = samples(x)
            if n % self.accumulation_steps:
                raise ValueError(f"Trainer.step: a batch of {n} samples does not split into "
                                 f"gradient_accumulation_steps={self.accumulation_steps} micro-batches of one size")
            self._micro_size = n // self.accumulation_steps
        return split(x, y, self._micro_size)

    def _accumulate(self, parts, model, dtype, seed):
        """Forward and backward over the micro-batches, gradients summed by autograd (_micro): the
        mean loss. The emulated model's rounding streams are the micro-steps step * k + m."""
        emulated, base = model is self.model, self.emulation.step
        loss, flushes, sums = 0.0, self.emulation.flushes, {}
        for m, (xm, ym) in enumerate(parts):
            grab = self._grab if emulated else self._shadow_grab
            grab.grads.clear()  # the activation columns: the last micro-batch's
            if emulated:
                self.emulation.step = base * self.accumulation_steps + m
            lm = self._forward_loss(model, xm, ym, dtype)
            (lm * torch.tensor(seed, dtype=lm.dtype)).backward()
            loss += float(lm) / len(parts)
            if emulated:  # (the shadow's binary64 sums: autograd's exact adds, as the CLI's)
                sum_gradients(model, sums, self.grad_accum_format or self.policy["gradients"], flushes)
                flushes.end_micro_batch(last=m == len(parts) - 1)
        if emulated:
            self.emulation.step = base
            flushes.end_accumulation(len(parts))
            for p in model.parameters():
                if id(p) in sums:
                    p.grad = sums[id(p)].to(p.dtype)
        return loss
