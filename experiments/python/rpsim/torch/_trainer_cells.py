"""The cells of rpsim.torch.Trainer's steps.csv and histograms.csv, as sim/train/src/telemetry.cpp
computes them (its sums, orders and norms), over the emulated model and its FP64 shadow; where a
cell has nothing to measure (a frozen layer has no weight gradient, no gradient reached a layer's
output) it is left empty, as the CLI leaves the shadow columns of a run without a shadow. What each
underflow fraction counts: _flushes."""
import torch

from .. import _core
from ._layer_groups import params as _params, trainable as _trainable
from ._run_files import _flat, _histogram, _nonfinite, _zero_vs, num
from ._scaler import _readable, _writable
from ._tables import MODULE_OPS


class TrainerCells:
    """Trainer's measurements (a mixin: self.emulation, self.layers, self.shadow_layers, self._grab ...)."""

    def _fp8_layer(self, module):
        op = MODULE_OPS.get(type(module))  # the op table's row of the module (none: not a GEMM layer)
        rule = self.emulation.rule(op) if op else None
        return bool(rule and rule.get("scaled_inputs"))

    def _fp8_cells(self):
        out = []
        for ln in self.fp8_layers:
            op = self.emulation.layer_ops.get(ln)
            stats = op.fp8_stats() if op is not None else {}
            for tensor in ("x", "w", "dy"):
                s = stats.get(tensor, {})
                n = s.get("entries", 0)
                # Per-tensor scaling records its one scale as scale_min (telemetry.cpp's fp8_cells).
                scales = (s.get("scale_min", float("nan")), s.get("scale_max", float("nan"))) \
                    if self.block_scaled else (s.get("scale_min", float("nan")),)
                out += [num(s.get("amax", 0.0))] + [num(v) for v in scales] + \
                    [num(s.get("saturated", 0) / n if n else 0), num(s.get("flushed", 0) / n if n else 0)]
        return out

    def _norm_format(self):
        c = self.policy["optimizer_compute"]
        return c if c in ("binary32", "binary64") else "binary32"

    def _clip(self, params, norm, c, gradients, flushed):
        """rpsim's clip_grad_norm (the op core's): coef = max_norm / (norm + 1e-6) in c; below 1, each
        gradient times coef rounded once to the gradients' format (flushed entries recorded in
        `flushed`, a _flushes.Flushes)."""
        if self.max_grad_norm <= 0:
            return
        coef = _core._clip_coefficient(self.max_grad_norm, norm, c)
        if coef >= 1.0:
            return
        with torch.no_grad():
            nonzero = [p.grad != 0 for p in params] if flushed is not None else None
            views = [_writable(p.grad) for p in params]
            _core._scale_gradients([v.numpy() for v, _ in views], coef, [gradients] * len(params))
            for i, ((v, back), p) in enumerate(zip(views, params)):
                if back:
                    p.grad.copy_(v)
                if nonzero is not None:
                    flushed.param(p, nonzero[i] & (p.grad == 0))

    def _cli_order(self, p, t):
        """t (p or its gradient) with its entries in the order the CLI holds p's: an embedding
        table (vocabulary x width) column by column (Eigen's order), so that sums over it (the
        norm's, the distance's) add in the CLI's order; nn.Linear's (out, in) rows already are
        the columns of the CLI's in x out weight."""
        return t.t() if id(p) in self._column_major else t

    def _grad_norm(self, params, c=None):
        """The gradients' L2 norm as rpsim's clip_grad_norm computes it (the op core's): in the
        optimizer's arithmetic (at least binary32), each tensor's squares summed in the CLI's element
        order, the tensors' sums added in parameter order, one rounding per operation."""
        c = c or self._norm_format()
        grads = [_readable(self._cli_order(p, p.grad).detach()).numpy() for p in params]
        return _core._grad_norm(grads, c)

    def _measure(self, finite=frozenset()):
        """Per layer: weight-gradient underflow, nonfinite and zero-vs-FP64 fractions over its trainable
        parameters' entries (None: none has a gradient), and the activation gradient's (None: none
        arrived): [under, nonfinite, activation under, activation nonfinite, zero_vs, activation zero_vs].
        finite: ids of parameters whose gradients the unscale found all finite (not looked at again)."""
        cells = []
        shadow = dict(self.shadow_layers)
        flushes = self.emulation.flushes
        for ln, m in self.layers:
            ps = _trainable(m)
            n = sum(p.grad.numel() for p in ps if p.grad is not None)
            sm = shadow.get(ln)
            under = nonfinite = zero_vs = None
            if n:
                under = flushes.weight_flushed(ps) / n
                # Per tensor, weighted by its size, then over the layer's entries: telemetry.cpp's sums
                # (exact predicates: on the gradients as they are, no float64 copies).
                nonfinite = sum(_nonfinite(p.grad) * p.numel() for p in ps
                                if p.grad is not None and id(p) not in finite) / n
                if sm:
                    zero_vs = sum(_zero_vs(p.grad.reshape(-1), q.grad.reshape(-1)) * p.numel()
                                  for p, q in zip(ps, _trainable(sm))
                                  if p.grad is not None and q.grad is not None) / n
            dy = self._grab.get(ln)
            a_under = a_nonfinite = a_zero = None
            if dy is not None:
                a_under = flushes.activation_flushed(ln) / dy.numel() if dy.numel() else 0
                a_nonfinite = _nonfinite(dy)
                sdy = self._shadow_grab.get(ln) if self._shadow_grab else None
                if sdy is not None:
                    a_zero = _zero_vs(dy.reshape(-1) / self.scaler.get_scale(), sdy.reshape(-1))
            cells.append([under, nonfinite, a_under, a_nonfinite, zero_vs, a_zero])
        return cells

    def _layer_cells(self, measured, before, skipped):
        out, k = [], 0
        shadow = dict(self.shadow_layers)
        cell = lambda v: "" if v is None else num(v)  # noqa: E731
        for (ln, m), c in zip(self.layers, measured):
            ps = _params(m)
            dist = ""
            if ln in shadow:
                we = [_readable(self._cli_order(p, p).detach()).numpy() for p in ps]
                ws = [_readable(self._cli_order(p, p).detach()).numpy() for p in _params(shadow[ln])]
                dist = num(_core._torch_rel_distance(we, ws))
            stalled = entries = 0
            for p in ps:
                if p.requires_grad:
                    entries += p.numel()
                    if not skipped and p.grad is not None:  # the optimizer's own count (step_ops)
                        stalled += _core._count_stalled(_readable(p.grad.detach()).numpy(),
                                                        _readable(p.detach()).numpy(), _readable(before[k]).numpy())
                k += 1
            out += [cell(c[0]), cell(c[1]), cell(c[2]), cell(c[3]), dist, cell(c[4]), cell(c[5]),
                    num(stalled / entries) if entries else ""]
        return out

    def _histograms(self, step, scale):
        shadow = dict(self.shadow_layers)
        for ln, m in self.layers:
            for arith, mod, grads, unscale in (("emulated", m, self._grab, 1.0 / scale),
                                               ("fp64", shadow.get(ln), self._shadow_grab, 1.0)):
                if mod is None:
                    continue
                dy = grads.get(ln) if grads is not None else None
                if dy is not None:
                    _histogram(self.histogram_rows, f"{step},{ln},activation_grad,{arith},", dy, unscale)
                g = _flat([p.grad for p in _params(mod)])
                _histogram(self.histogram_rows, f"{step},{ln},weight_grad,{arith},", g, 1.0)
