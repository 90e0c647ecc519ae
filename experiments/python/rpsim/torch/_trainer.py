"""rpsim.torch.Trainer: a user's model under a policy, a float64 shadow copy stepped in lockstep on
the same batches, and `rpsim train`'s files (steps.csv, histograms.csv, evaluations.csv,
meta.json, their columns as sim/train/src/telemetry.cpp and trainer.cpp write them)."""
import contextlib
import json
import os
import signal

import torch
from torch import nn

from .. import _core
from . import _blockscale, _micro
from ._emulate import emulate
from ._layer_groups import Grabber as _Grabber, layers as _layers, params as _params
from ._loss_layout import class_layout, loss_of
from ._progress import ProgressLine
from ._reference import RpsimLoss
from ._run_files import RunningMeta, append_text, ensure_writable_dir, num, write_atomic
from ._scaler import GradScaler
from ._shadow import binary64_loss, same_draws, same_hyperparameters, same_modes, shadow_copy, versions, \
    written_since
from ._trainer_cells import TrainerCells
from ._unsupported import check_batch, check_not_emulated, check_optimizer, check_output, check_output_arg, \
    check_same_parameters, check_scheduler_arg, check_trainer_args

_WHO = "rpsim.torch.Trainer"


@contextlib.contextmanager
def _evaluating(model):
    """model in eval mode (BatchNorm's running statistics, no dropout), then each module back in its own
    mode: model.train(was_training) set every module to train, a BatchNorm the user froze with eval() too."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


def _call(model, x, dtype):
    """model on batch x: a tensor, a tuple or list of its arguments, or a dict of its keyword arguments
    (input_ids=, attention_mask=); floating-point tensors cast to dtype (the shadow's float64)."""
    def cast(t):
        return t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
    if isinstance(x, dict):
        return model(**{k: cast(v) for k, v in x.items()})
    if isinstance(x, (tuple, list)):
        return model(*map(cast, x))
    return model(cast(x))


class Trainer(TrainerCells, _micro.Accumulation):
    """Trainer(model, policy="fp16-amp", optimizer=lambda params: torch.optim.SGD(params, lr=0.1),
    loss=torch.nn.functional.cross_entropy, scaler=None, shadow=True, accumulation=None, out=None, ...)

    step(x, y) runs one step of the emulated model and, with shadow, of a float64 copy (its GEMMs
    on rpsim's binary64 kernel, as the CLI's fp64 shadow) on the same batch (a checkpoint loaded, a
    layer frozen or a module set to eval() after Trainer() reach the copy at the next step);
    evaluate(batches) scores both. out: the run's folder, checked (made, written to) here, before any step
    (OutputDirError); each step's rows are written as the step ends (steps.csv, histograms.csv
    appended, meta.json and evaluations.csv replaced atomically), so a loop stopped by Ctrl-C or
    an error keeps every finished step (meta.json: "partial": true until finish()); finish()
    writes the four files whole. scaler: a policy name of the loss-scaler table, a GradScaler, or
    None for the policy's default ("dynamic" means PyTorch's). max_grad_norm > 0 clips as rpsim does
    (its norm, coef in the optimizer's arithmetic); lr_schedule(step, applied) sets every group's lr
    per step (rpsim.torch.lr_schedule(config)); scheduler(optimizer) makes a torch LR scheduler
    (lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=100)), one for the
    model's optimizer and one for the shadow's, each stepped once per step (ReduceLROnPlateau on the
    emulated step's loss, both). gradient_accumulation_steps:
    micro-batches per step, as rpsim train runs them (_micro), their gradients summed in
    grad_accum_format (None: the policy's gradient format). Ctrl-C inside run() stops at a step
    boundary, and the files say partial. Progress lines go to stderr as `rpsim train` prints them
    (steps/s, loss, scale; an ETA where total_steps is given or run()'s batches have a length);
    quiet=True: none.
    x: a tensor, a tuple of the model's arguments or a dict of its keyword arguments.
    y: class labels (integer) or, for a regression loss, float targets (cast to the model output's
    dtype: float64 for the shadow). loss(output, y) gets the model's output as it is, as a plain loop
    calls it; the default cross-entropy and RpsimLoss take a sequence model's (B, T, V) logits
    against (B, T) labels flattened to (B * T, V). output: what the loss and the accuracy take from
    a model that returns more than its logits: a key (output="out": torchvision's segmentation models' dict), an
    index (output=0: a tuple's first) or a function of the model's output; None: the output itself,
    which a loss of yours may take whole (a namedtuple with auxiliary heads' logits; accuracy: nan)."""

    def __init__(self, model, policy="fp16-amp", optimizer=None, loss=None, *, scaler=None, shadow=True,
                 accumulation=None, out=None, seed=0, name="rpsim.torch", histogram_steps=(0,), max_grad_norm=0.0,
                 lr_schedule=None, quiet=False, total_steps=None, output=None, scheduler=None,
                 gradient_accumulation_steps=1, grad_accum_format=None):
        check_trainer_args(model, optimizer, loss, scaler, histogram_steps, max_grad_norm)
        check_output_arg(output)
        check_scheduler_arg(scheduler, lr_schedule)
        self._make_scheduler = scheduler
        _micro.check_steps(gradient_accumulation_steps)
        self.accumulation_steps, self._micro_size = gradient_accumulation_steps, None
        self.grad_accum_format = grad_accum_format
        self.output = output
        if total_steps is not None and (isinstance(total_steps, bool) or not isinstance(total_steps, int)
                                        or total_steps < 1):
            raise ValueError(f"total_steps: {total_steps!r} is not a positive number of steps (None: unknown)")
        # The folder before step 0, as rpsim train checks it: not after the whole run (issue #36).
        out = ensure_writable_dir(out, _WHO) if out is not None else None
        self.quiet, self.total_steps, self._progress, self._written = quiet, total_steps, None, None
        # A training loop's malloc, as `rpsim train` sets it: freed tensors are kept for the next step's
        # (faulting them in again page by page was about half of a conv GEMM's backward).
        _core.keep_freed_memory()
        self._meta = RunningMeta(self, "_write_running_meta") if out is not None else None
        make_opt = optimizer or (lambda params: torch.optim.SGD(params, lr=0.1))
        self.loss_fn = loss or nn.functional.cross_entropy
        # A sequence model's (B, T, V) logits are flattened for rpsim's own losses only (the default,
        # RpsimLoss); a loss the user wrote gets the model's output and y as their own loop gives them
        # (one that transposed (B, T, V) to PyTorch's (B, V, T) failed on the flattened 2-D output).
        self._own_layout = loss is None or isinstance(loss, RpsimLoss)
        # rpsim's loss kernel: the shadow's under the fp64 policy, as the CLI's shadow.
        self.shadow_loss_fn = RpsimLoss(loss.op, "fp64") if isinstance(loss, RpsimLoss) \
            else binary64_loss(self.loss_fn)
        self.name, self.seed, self.out = name, seed, out
        self.max_grad_norm = max_grad_norm
        self.lr_schedule = lr_schedule  # (step, applied steps) -> lr, set on every param group
        self.histogram_steps = set(histogram_steps)
        self.layers = _layers(model)  # (a bad rpsim_layers fails before the model is touched)
        check_not_emulated(model)
        self.shadow_model = shadow_copy(model) if shadow else None
        self.model = model
        self.emulation = emulate(model, policy, accumulation, seed=seed)
        try:
            self._attach(model, scaler, make_opt, shadow, seed)
            self._versions, self._made_with = versions(model), {id(p): n for n, p in model.named_parameters()}
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
        self.optimizer = self.emulation.optimizer(check_optimizer(make_opt(model.parameters())))
        if shadow:
            self.shadow_emulation = emulate(self.shadow_model, "fp64", seed=seed)
            if self.dtype != torch.float64:  # noise drawn in the forward: in the model's dtype (Binary64Meets)
                self.shadow_emulation.draws = self.dtype
            self.shadow_optimizer = make_opt(self.shadow_model.parameters())
        opts = [self.optimizer] + ([self.shadow_optimizer] if shadow else [])
        self.schedulers = [self._make_scheduler(o) for o in opts] if self._make_scheduler else []
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
        self.block_scaled = self.policy.get("fp8", {}).get("scaling") in _blockscale.SCALINGS
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
        out = check_output(_call(model, x, dtype), output=self.output, any_output=not self._own_layout)
        return loss_of(self.shadow_loss_fn if model is self.shadow_model else self.loss_fn, out, y, self._own_layout)

    def step(self, x, y, epoch=0):
        """One optimizer step on batch (x, y); returns the emulated loss."""
        # (A loss of yours reads the batch as your model lays it out (a time-major RNN's (T, N, F) with
        # CTC targets (N, S)); micro-batches and rpsim's losses split and read it along dimension 0.)
        check_batch(x, y, sizes=self._own_layout or self.accumulation_steps > 1)
        check_same_parameters(self.model, self._made_with)
        if written_since(self.model, self.shadow_model, self._versions):  # a checkpoint loaded: in the shadow
            self.emulation._store_parameters()  # too, and in the policy's weight format
        if self._progress is None and not self.quiet:  # the clock of the rate starts with the first step
            self._progress = ProgressLine(f"rpsim.torch.Trainer {self.name}")
        step = self.step_index
        if self.lr_schedule is not None:
            lr = self.lr_schedule(step, step - self.skipped_steps)
            for opt in (self.optimizer, getattr(self, "shadow_optimizer", None)):
                for group in opt.param_groups if opt is not None else ():
                    group["lr"] = lr
        self.emulation.flushes.clear()
        self._grab.grads.clear()
        self.optimizer.zero_grad(set_to_none=True)
        scale = self.scaler.get_scale()
        parts = self._micro_batches(x, y)
        rng = torch.get_rng_state()  # the shadow's forward draws what the emulated one drew (dropout)
        if self.accumulation_steps == 1:  # (k > 1: the accumulator and micro-step keys even for one part)
            loss = self._forward_loss(self.model, x, y, self.dtype)
            self.scaler.scale(loss).backward()
        else:
            loss = self._accumulate(parts, self.model, self.dtype, _micro.seed(scale, len(parts)))
        self.scaler.unscale_(self.optimizer)
        found = self.scaler.found_inf()
        params = [p for p in self.model.parameters() if p.grad is not None]
        for p in params:  # the entries the unscale flushed (masks: counted once with the others)
            if id(p) in self.scaler.flushed:
                self.emulation.flushes.param(p, self.scaler.flushed[id(p)])
        grad_norm = float("nan")  # not computed on an overflow step, as the CLI writes it
        if not found:
            grad_norm = self._grad_norm(params)
            self._clip(params, grad_norm, self._norm_format(), self.policy["gradients"], self.emulation.flushes)
        before = [p.detach().clone() for _, m in self.layers for p in _params(m)]
        shadow_loss = float("nan")
        if self.shadow_model is not None:
            same_modes(self.model, self.shadow_model)
            same_hyperparameters(self.optimizer, self.shadow_optimizer)
            with same_draws(rng):  # dropout's masks, noise: the emulated model's (_shadow)
                self._shadow_grab.grads.clear()
                self.shadow_optimizer.zero_grad(set_to_none=True)
                if self.accumulation_steps == 1:
                    sl = self._forward_loss(self.shadow_model, x, y, torch.float64)
                    sl.backward()
                else:
                    sl = self._accumulate(parts, self.shadow_model, torch.float64, 1.0 / len(parts))
                if self.max_grad_norm > 0:
                    sp = [p for p in self.shadow_model.parameters() if p.grad is not None]
                    self._clip(sp, self._grad_norm(sp, "binary64"), "binary64", "binary64", None)
                shadow_loss = float(sl)
        if step in self.histogram_steps:
            self._histograms(step, scale)
        # The unscale looked at every gradient the optimizer steps: none is nonfinite if it found none.
        finite = {id(p) for g in self.optimizer.param_groups for p in g["params"]} \
            if self.scaler.is_enabled() and not found else frozenset()
        measured = self._measure(finite)
        skipped = self.scaler.step(self.optimizer) is None and self.scaler._scaler.skips(found)
        self.scaler.update()
        self.skipped_steps += int(skipped)
        if self.shadow_model is not None:
            self.shadow_optimizer.step()
        for s in self.schedulers:  # one scheduler step per optimizer step, the shadow's in lockstep:
            # ReduceLROnPlateau's on the emulated loss for both (one lr sequence; the shadow isolates
            # the arithmetic)
            s.step(float(loss)) if isinstance(s, torch.optim.lr_scheduler.ReduceLROnPlateau) else s.step()
        head = [str(step), str(epoch), num(loss), num(shadow_loss) if self.shadow_model is not None else "",
                num(scale), "1" if skipped else "0", "1" if found else "0", num(grad_norm)]
        self.steps_rows.append(",".join(head + self._layer_cells(measured, before, skipped) + self._fp8_cells()))
        self.step_index += 1
        self._versions = versions(self.model)
        self._write_new_rows()
        self._report(float(loss), scale)
        return float(loss)

    def _report(self, loss, scale):
        if self._progress is not None:
            self._progress.update(self.step_index, self.total_steps, f"loss {loss:.4f}, scale {scale:g}")

    # -- evaluation and files --------------------------------------------------------------------
    def evaluate(self, batches, epoch=0):
        """Test loss (nats, mean over batches weighted by size) and accuracy (% of argmax hits; nan
        for float regression targets) of the emulated model and the shadow on `batches` of (x, y)."""
        def score(model, dtype):
            loss_fn = self.shadow_loss_fn if model is self.shadow_model else self.loss_fn
            loss = hits = count = 0.0
            with _evaluating(model), torch.no_grad():
                for x, y in batches:
                    check_batch(x, y, "Trainer.evaluate", sizes=self._own_layout)
                    out = check_output(_call(model, x, dtype), "Trainer.evaluate", self.output, not self._own_layout)
                    n = y.shape[0] if y.is_floating_point() else y.numel()
                    loss, count = loss + float(loss_of(loss_fn, out, y, self._own_layout)) * n, count + n
                    if y.is_floating_point() or not isinstance(out, torch.Tensor):  # no logits to take argmax of
                        hits = float("nan")
                        continue
                    flat, yy, class_dim = class_layout(out, y)
                    pred = flat.argmax(class_dim)
                    # (a layout of your loss's the accuracy cannot read: CTC's (T, N, C) against (N, S))
                    hits = hits + float((pred == yy).sum()) if pred.shape == yy.shape else float("nan")
            return loss / count, 100.0 * hits / count
        rng = torch.get_rng_state()  # a dropout left on in eval draws the same masks in both (step's note)
        e = score(self.model, self.dtype)
        s = (None, None)
        if self.shadow_model is not None:
            with same_draws(rng):
                s = score(self.shadow_model, torch.float64)
        self.evaluations.append({"step": self.step_index, "epoch": epoch, "test_loss_nats": e[0],
                                 "test_accuracy_percent": e[1], "shadow_test_loss_nats": s[0],
                                 "shadow_test_accuracy_percent": s[1]})
        if self.out is not None:
            write_atomic(os.path.join(self.out, "evaluations.csv"), self.evaluations_csv(), _WHO)
        self._versions = versions(self.model)  # (a buffer a forward writes even in eval: not the user's edit)
        return self.evaluations[-1]

    def run(self, batches, epochs=1):
        """step() over `batches` (x, y) for `epochs`; Ctrl-C stops at a step boundary (partial)."""
        stop = []
        previous = signal.signal(signal.SIGINT, lambda *_: stop.append(True))
        if self.total_steps is None and hasattr(batches, "__len__"):  # the progress lines' ETA
            self.total_steps = self.step_index + len(batches) * epochs
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

    def meta(self, running=False):
        """meta.json's content; running: written during the run, "partial" until finish()."""
        return {"front_end": "rpsim.torch", "name": self.name, "seed": self.seed, "policy": self.policy,
                "loss_scaler": {"policy": self.scaler.policy, "final_scale": self.scaler.get_scale(),
                                "state": self.scaler.state()},
                "parameters": sum(p.numel() for p in self.model.parameters()),
                "trainable_parameters": sum(p.numel() for p in self.model.parameters() if p.requires_grad),
                "steps": self.step_index, "partial": self.partial or running, "skipped_steps": self.skipped_steps,
                "shadow": self.shadow_model is not None, "evaluations": self.evaluations,
                "ops": self.emulation.summary()}

    @property
    def steps_csv(self):
        return "\n".join(self.steps_rows) + "\n"

    @property
    def histograms_csv(self):
        return "\n".join(self.histogram_rows) + "\n"

    def _write_files(self, out, running):
        write_atomic(os.path.join(out, "steps.csv"), self.steps_csv, _WHO)
        write_atomic(os.path.join(out, "histograms.csv"), self.histograms_csv, _WHO)
        write_atomic(os.path.join(out, "evaluations.csv"), self.evaluations_csv(), _WHO)
        write_atomic(os.path.join(out, "meta.json"), json.dumps(self.meta(running), indent=2) + "\n", _WHO)
        if out == self.out:
            self._written = (len(self.steps_rows), len(self.histogram_rows))
            self._meta.due()  # (the clock of the next replacement)
            self._meta.done = not running

    def _write_running_meta(self):
        write_atomic(os.path.join(self.out, "meta.json"), json.dumps(self.meta(True), indent=2) + "\n", _WHO)

    def _write_new_rows(self):
        """The step's rows added to steps.csv and histograms.csv (the first step: the four files made
        afresh), meta.json replaced at RunningMeta's cadence: a Ctrl-C between or inside steps leaves
        every finished step in steps.csv."""
        if self.out is None:
            return
        if self._written is None:
            self._write_files(self.out, running=True)
            return
        steps, hist = self._written
        append_text(os.path.join(self.out, "steps.csv"), "".join(r + "\n" for r in self.steps_rows[steps:]), _WHO)
        if len(self.histogram_rows) > hist:
            append_text(os.path.join(self.out, "histograms.csv"),
                        "".join(r + "\n" for r in self.histogram_rows[hist:]), _WHO)
        self._written = (len(self.steps_rows), len(self.histogram_rows))
        if self._meta.due():
            self._write_running_meta()

    def finish(self, out=None):
        """Writes the four files to `out` (or the constructor's), each atomically; returns meta."""
        if self._progress is not None:
            self._progress.finish()
            self._progress = None
        if out is not None and out != self.out:
            out = ensure_writable_dir(out, _WHO)
        out = out or self.out
        meta = self.meta()
        if out:
            self._write_files(out, running=False)
        return meta
