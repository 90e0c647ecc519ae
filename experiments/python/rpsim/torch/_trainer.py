"""rpsim.torch.Trainer: a user's model under a policy, a float64 shadow copy stepped in lockstep on
the same batches, and `rpsim train`'s files (steps.csv, histograms.csv, evaluations.csv,
meta.json, their columns as sim/train/src/telemetry.cpp and trainer.cpp write them)."""
import copy
import json
import os
import signal

import torch
from torch import nn

from .. import _core
from ._emulate import emulate
from ._layer_groups import Grabber as _Grabber, layers as _layers, logged as _logged, params as _params
from ._reference import RpsimLoss
from ._run_files import _flat, _histogram, _nonfinite, _write_atomic, _zero_vs, num
from ._scaler import GradScaler, _writable
from ._unsupported import check_batch, check_not_emulated, check_trainer_args


class Trainer:
    """Trainer(model, policy="fp16-amp", optimizer=lambda params: torch.optim.SGD(params, lr=0.1),
    loss=torch.nn.functional.cross_entropy, scaler=None, shadow=True, accumulation=None, out=None, ...)

    step(x, y) runs one step of the emulated model and, with shadow, of a float64 copy (its GEMMs
    on rpsim's binary64 kernel, as the CLI's fp64 shadow) on the same batch; evaluate(batches)
    scores both; finish() writes steps.csv, histograms.csv, evaluations.csv and meta.json to out
    (atomically). scaler: a policy name of the loss-scaler table, a GradScaler, or None for the
    policy's default ("dynamic" means PyTorch's). max_grad_norm > 0 clips as rpsim does (its norm,
    coef in the optimizer's arithmetic); lr_schedule(step, applied) sets every group's lr per step
    (rpsim.torch.lr_schedule(config)). Ctrl-C inside run() stops at a step boundary, and the files
    say partial."""

    def __init__(self, model, policy="fp16-amp", optimizer=None, loss=None, *, scaler=None, shadow=True,
                 accumulation=None, out=None, seed=0, name="rpsim.torch", histogram_steps=(0,), max_grad_norm=0.0,
                 lr_schedule=None):
        check_trainer_args(model, optimizer, loss, scaler, histogram_steps)
        make_opt = optimizer or (lambda params: torch.optim.SGD(params, lr=0.1))
        self.loss_fn = loss or nn.functional.cross_entropy
        # rpsim's loss kernel: the shadow's under the fp64 policy, as the CLI's shadow.
        self.shadow_loss_fn = RpsimLoss(loss.op, "fp64") if isinstance(loss, RpsimLoss) else self.loss_fn
        self.name, self.seed, self.out = name, seed, out
        self.max_grad_norm = max_grad_norm
        self.lr_schedule = lr_schedule  # (step, applied steps) -> lr, set on every param group
        self.histogram_steps = set(histogram_steps)
        self.layers = _layers(model)  # (a bad rpsim_layers fails before the model is touched)
        check_not_emulated(model)
        self.shadow_model = copy.deepcopy(model).double() if shadow else None
        self.model = model
        self.emulation = emulate(model, policy, accumulation, seed=seed)
        try:
            self._attach(model, scaler, make_opt, shadow, seed)
        except BaseException:  # the model as it was given: a corrected Trainer(model, ...) may follow
            self.emulation.remove()
            raise

    def _attach(self, model, scaler, make_opt, shadow, seed):
        self.policy = self.emulation.policy
        # The batches in binary64 where the policy's data are (fp64; emulate needs a float64 model).
        wide = self.policy["data"] == "binary64" and all(p.dtype == torch.float64 for p in model.parameters())
        self.dtype = torch.float64 if wide else torch.float32
        if scaler is None:
            scaler = self.policy["default_loss_scaler"]  # an alias ("dynamic") is the scaler table's
        self.scaler = scaler if isinstance(scaler, GradScaler) else GradScaler(scaler)
        if self.scaler._scaler.per_layer:
            # Zhao et al.'s factors multiply each layer's incoming gradient inside backward; a GradScaler
            # only scales the loss, so the run would be a static scaler's, not the one asked for.
            raise ValueError(f"rpsim.torch.Trainer: loss scaler {self.scaler.policy!r} scales layer by layer "
                             "during backward, which rpsim.torch does not simulate; use `rpsim train` "
                             "(its steps.csv has the <layer>_loss_scale columns)")
        self.emulation.telemetry = self.scaler.count_flushed = True
        self.optimizer = self.emulation.optimizer(make_opt(model.parameters()))
        if shadow:
            self.shadow_emulation = emulate(self.shadow_model, "fp64", seed=seed)
            self.shadow_optimizer = make_opt(self.shadow_model.parameters())
        self._column_major = set(self.emulation.embedding_tables)
        if shadow:
            self._column_major |= self.shadow_emulation.embedding_tables
        self.shadow_layers = _layers(self.shadow_model) if shadow else []
        self._grab = _Grabber(self.layers)
        self._shadow_grab = _Grabber(self.shadow_layers) if shadow else None
        cols = ["step", "epoch", "loss_emulated_nats", "loss_fp64_nats", "loss_scale", "skipped", "overflow_found",
                "grad_norm"]
        for ln, _ in self.layers:
            cols += [f"{ln}_weight_grad_underflow_fraction", f"{ln}_weight_grad_nonfinite_fraction",
                     f"{ln}_activation_grad_underflow_fraction", f"{ln}_activation_grad_nonfinite_fraction",
                     f"{ln}_weight_rel_distance_from_fp64", f"{ln}_weight_grad_zero_vs_fp64_fraction",
                     f"{ln}_activation_grad_zero_vs_fp64_fraction", f"{ln}_weight_update_stalled_fraction"]
        # FP8 columns after every per-layer column (telemetry.cpp's fp8_columns), per tensor of
        # each layer whose GEMM the policy runs in FP8 with per-tensor scaling.
        # (a layer the recipe keeps in bf16 has no FP8 columns, as in rpsim train)
        self.fp8_layers = [ln for ln, m in self.layers
                           if self._fp8_layer(m) and ln not in self.emulation.high_precision_layers]
        # MX, NVFP4: one scale per block, their range where the per-tensor scale stands (block_scaled).
        self.block_scaled = self.policy.get("fp8", {}).get("scaling") in ("mx", "nvfp4")
        scales = ["scale_min", "scale_max"] if self.block_scaled else ["scale"]
        for ln in self.fp8_layers:
            for tensor in ("x", "w", "dy"):
                p = f"{ln}.{tensor}_fp8_"
                cols += [p + "amax"] + [p + s for s in scales] + [p + "saturated_fraction", p + "flushed_fraction"]
        self.steps_rows = [",".join(cols)]
        self.histogram_rows = ["step,layer,tensor,arithmetic,log2_abs_bin,count"]
        self.evaluations = []
        self.step_index = self.skipped_steps = 0
        self.partial = False

    # -- one step --------------------------------------------------------------------------------
    def _forward_loss(self, model, x, y, dtype):
        x = x.to(dtype) if x.is_floating_point() else x
        out = model(x)
        fn = self.shadow_loss_fn if model is self.shadow_model else self.loss_fn
        return fn(out.flatten(0, -2) if out.dim() > 2 else out, y.flatten() if out.dim() > 2 else y)

    def step(self, x, y, epoch=0):
        """One optimizer step on batch (x, y); returns the emulated loss."""
        check_batch(x, y)
        step = self.step_index
        if self.lr_schedule is not None:
            lr = self.lr_schedule(step, step - self.skipped_steps)
            for opt in (self.optimizer, getattr(self, "shadow_optimizer", None)):
                for group in opt.param_groups if opt is not None else ():
                    group["lr"] = lr
        self.emulation.flush_log.clear()
        self._grab.grads.clear()
        self.optimizer.zero_grad(set_to_none=True)
        scale = self.scaler.get_scale()
        loss = self._forward_loss(self.model, x, y, self.dtype)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        found = self.scaler.found_inf()
        params = [p for p in self.model.parameters() if p.grad is not None]
        grad_norm = float("nan")  # not computed on an overflow step, as the CLI writes it
        if not found:
            grad_norm = self._grad_norm(params)
            self._clip(params, grad_norm, self._norm_format(), self.policy["gradients"], self.scaler.flushed)
        before = [p.detach().clone() for _, m in self.layers for p in _params(m)]
        shadow_loss = float("nan")
        if self.shadow_model is not None:
            self._shadow_grab.grads.clear()
            self.shadow_optimizer.zero_grad(set_to_none=True)
            sl = self._forward_loss(self.shadow_model, x, y, torch.float64)
            sl.backward()
            if self.max_grad_norm > 0:
                sp = [p for p in self.shadow_model.parameters() if p.grad is not None]
                self._clip(sp, self._grad_norm(sp, "binary64"), "binary64", "binary64", None)
            shadow_loss = float(sl)
        if step in self.histogram_steps:
            self._histograms(step, scale)
        measured = self._measure()
        skipped = self.scaler.step(self.optimizer) is None and self.scaler._scaler.skips(found)
        self.scaler.update()
        self.skipped_steps += int(skipped)
        if self.shadow_model is not None:
            self.shadow_optimizer.step()
        head = [str(step), str(epoch), num(loss), num(shadow_loss) if self.shadow_model is not None else "",
                num(scale), "1" if skipped else "0", "1" if found else "0", num(grad_norm)]
        self.steps_rows.append(",".join(head + self._layer_cells(measured, before, skipped) + self._fp8_cells()))
        self.step_index += 1
        return float(loss)

    def _fp8_layer(self, module):
        op = {nn.Linear: "linear", nn.Conv2d: "conv2d", nn.Conv1d: "conv2d"}.get(type(module))
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
                # Per-tensor scaling records its scale as scale_min (telemetry.cpp's fp8_cells).
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
        gradient times coef rounded once to the gradients' format (flushed entries added to `flushed`)."""
        if self.max_grad_norm <= 0:
            return
        coef = _core._clip_coefficient(self.max_grad_norm, norm, c)
        if coef >= 1.0:
            return
        with torch.no_grad():
            views = [_writable(p.grad) for p in params]
            counts = _core._scale_gradients([v.numpy() for v, _ in views], coef, [gradients] * len(params))
            for (v, back), p, n in zip(views, params, counts):
                if back:
                    p.grad.copy_(v)
                if flushed is not None:
                    flushed[id(p)] = flushed.get(id(p), 0) + n

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
        grads = [self._cli_order(p, p.grad).detach().double().contiguous().numpy() for p in params]
        return _core._grad_norm(grads, c)

    def _measure(self):
        cells = []
        shadow = dict(self.shadow_layers)
        for ln, m in self.layers:
            ps = _params(m)
            grads = _flat([p.grad for p in ps])
            n = grads.numel()
            under = _logged(self.emulation.flush_log, ln, "weight")
            under += sum(self.scaler.flushed.get(id(p), 0) for p in ps)
            sm = shadow.get(ln)
            # Per tensor, weighted by its size, then over the layer's entries: telemetry.cpp's sums.
            zero_vs = None
            if sm:
                z = sum(_zero_vs(_flat([p.grad]), _flat([q.grad])) * p.numel()
                        for p, q in zip(ps, _params(sm)))
                zero_vs = z / n if n else 0.0
            nonfinite = sum(_nonfinite(_flat([p.grad])) * p.numel() for p in ps)
            nonfinite = nonfinite / n if n else 0.0
            dy = self._grab.grads.get(ln)
            a_under = _logged(self.emulation.flush_log, ln, "activation")
            a_n = dy.numel() if dy is not None else 0
            sdy = self._shadow_grab.grads.get(ln) if self._shadow_grab else None
            a_zero = _zero_vs(dy.reshape(-1) / self.scaler.get_scale(), sdy.reshape(-1)) \
                if dy is not None and sdy is not None else None
            cells.append([under / n if n else 0, nonfinite, a_under / a_n if a_n else 0,
                          _nonfinite(dy) if dy is not None else 0, zero_vs, a_zero])
        return cells

    def _layer_cells(self, measured, before, skipped):
        out, k = [], 0
        shadow = dict(self.shadow_layers)
        for (ln, m), c in zip(self.layers, measured):
            ps = _params(m)
            we = _flat([self._cli_order(p, p) for p in ps])
            dist = ""
            if ln in shadow:
                ws = _flat([self._cli_order(p, p) for p in _params(shadow[ln])])
                dist = num(_core._torch_rel_distance(we.numpy(), ws.numpy()))
            stalled = 0
            for p in ps:
                if not skipped and p.grad is not None:
                    stalled += int(((p.grad != 0) & (p.detach() == before[k])).sum())
                k += 1
            entries = sum(p.numel() for p in ps)
            out += [num(c[0]), num(c[1]), num(c[2]), num(c[3]), dist, "" if c[4] is None else num(c[4]),
                    "" if c[5] is None else num(c[5]), num(stalled / entries if entries else 0)]
        return out

    def _histograms(self, step, scale):
        shadow = dict(self.shadow_layers)
        for ln, m in self.layers:
            for arith, mod, grads, unscale in (("emulated", m, self._grab.grads, 1.0 / scale),
                                               ("fp64", shadow.get(ln), self._shadow_grab.grads
                                                if self._shadow_grab else {}, 1.0)):
                if mod is None:
                    continue
                dy = grads.get(ln)
                if dy is not None:
                    _histogram(self.histogram_rows, f"{step},{ln},activation_grad,{arith},", dy, unscale)
                g = _flat([p.grad for p in _params(mod)])
                _histogram(self.histogram_rows, f"{step},{ln},weight_grad,{arith},", g, 1.0)

    # -- evaluation and files --------------------------------------------------------------------
    def evaluate(self, batches, epoch=0):
        """Test loss (nats, mean over batches weighted by size) and accuracy (% of argmax hits) of
        the emulated model and the shadow on `batches` of (x, y)."""
        def score(model, dtype):
            loss_fn = self.shadow_loss_fn if model is self.shadow_model else self.loss_fn
            loss = hits = count = 0.0
            was_training = model.training
            model.eval()  # BatchNorm's running statistics, no dropout
            with torch.no_grad():
                for x, y in batches:
                    out = model(x.to(dtype) if x.is_floating_point() else x)
                    out, yy = (out.flatten(0, -2), y.flatten()) if out.dim() > 2 else (out, y)
                    loss += float(loss_fn(out, yy)) * yy.numel()
                    hits += float((out.argmax(-1) == yy).sum())
                    count += yy.numel()
            model.train(was_training)
            return loss / count, 100.0 * hits / count
        e = score(self.model, self.dtype)
        s = score(self.shadow_model, torch.float64) if self.shadow_model is not None else (None, None)
        self.evaluations.append({"step": self.step_index, "epoch": epoch, "test_loss_nats": e[0],
                                 "test_accuracy_percent": e[1], "shadow_test_loss_nats": s[0],
                                 "shadow_test_accuracy_percent": s[1]})
        return self.evaluations[-1]

    def run(self, batches, epochs=1):
        """step() over `batches` (x, y) for `epochs`; Ctrl-C stops at a step boundary (partial)."""
        stop = []
        previous = signal.signal(signal.SIGINT, lambda *_: stop.append(True))
        try:
            for epoch in range(epochs):
                for x, y in batches:
                    if stop:
                        self.partial = True
                        return self
                    self.step(x, y, epoch)
        finally:
            signal.signal(signal.SIGINT, previous)
        return self

    def evaluations_csv(self):
        rows = ["step,epoch,test_loss_emulated_nats,test_loss_fp64_nats,test_accuracy_emulated_percent,"
                "test_accuracy_fp64_percent"]
        sh = self.shadow_model is not None
        for e in self.evaluations:
            rows.append(f"{e['step']},{e['epoch']},{num(e['test_loss_nats'])},"
                        f"{num(e['shadow_test_loss_nats']) if sh else ''},{num(e['test_accuracy_percent'])},"
                        f"{num(e['shadow_test_accuracy_percent']) if sh else ''}")
        return "\n".join(rows) + "\n"

    def meta(self):
        return {"front_end": "rpsim.torch", "name": self.name, "seed": self.seed, "policy": self.policy,
                "loss_scaler": {"policy": self.scaler.policy, "final_scale": self.scaler.get_scale(),
                                "state": self.scaler.state()},
                "parameters": sum(p.numel() for p in self.model.parameters()), "steps": self.step_index,
                "partial": self.partial, "skipped_steps": self.skipped_steps,
                "shadow": self.shadow_model is not None, "evaluations": self.evaluations,
                "ops": self.emulation.summary()}

    @property
    def steps_csv(self):
        return "\n".join(self.steps_rows) + "\n"

    @property
    def histograms_csv(self):
        return "\n".join(self.histogram_rows) + "\n"

    def finish(self, out=None):
        """Writes the four files to `out` (or the constructor's), each atomically; returns meta."""
        out = out or self.out
        meta = self.meta()
        if out:
            os.makedirs(out, exist_ok=True)
            _write_atomic(os.path.join(out, "steps.csv"), self.steps_csv)
            _write_atomic(os.path.join(out, "histograms.csv"), self.histograms_csv)
            _write_atomic(os.path.join(out, "evaluations.csv"), self.evaluations_csv())
            _write_atomic(os.path.join(out, "meta.json"), json.dumps(meta, indent=2) + "\n")
        return meta
