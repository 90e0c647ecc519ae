"""rpsim.torch.Telemetry: the underflow trajectory of a real PyTorch training run, step by step.

    tel = rpsim.torch.Telemetry(model, out="results/myrun", scaler=scaler, every=10, sample=4096)
    for x, y in data:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        tel.step(loss)              # after backward, before scaler.step / unscale_
        scaler.step(opt); scaler.update(); opt.zero_grad()
    tel.close()                     # or `with Telemetry(...) as tel:`

It writes steps.csv / histograms.csv / meta.json with `rpsim train`'s columns (and per-format
columns of its own; for a block-scaled policy among formats=, e.g. ("binary16", "mxfp8", "nvfp4",
"fp8-blockwise"), what that recipe's gradient quantiser would do to each tensor at this step, as
`rpsim grads --recipes` reports it and TE's LogFp8TensorStats does for its own recipe), and with dump_steps=(N,) grads_step<N>.npz, which `rpsim grads` reads.
The out= folder is checked when Telemetry is made; each recorded step's rows are written as the
step ends, so a loop stopped by Ctrl-C or an error keeps every step it finished (meta.json, replaced
at most once a second and at exit, says "closed": false until close()). Detached (close()), no
hook remains: the loop runs as it would without it.
"""
import json
import math
import os

import numpy as np
import torch

from ._functional import attach_functional
from ._gradstats import TensorStats, formats_and_recipes, sample_flat
from ._run_files import RunningMeta, append_text, ensure_writable_dir, write_atomic

HEAD = ["step", "epoch", "loss_emulated_nats", "loss_fp64_nats", "loss_scale", "skipped", "overflow_found",
        "grad_norm"]
# rpsim train's per-layer columns this run can fill (the shadow-run columns stay empty).
LAYER = ["weight_grad_underflow_fraction", "weight_grad_nonfinite_fraction", "activation_grad_underflow_fraction",
         "activation_grad_nonfinite_fraction", "weight_rel_distance_from_fp64", "weight_grad_zero_vs_fp64_fraction",
         "activation_grad_zero_vs_fp64_fraction", "weight_update_stalled_fraction"]
PER_FORMAT = ["underflow_fraction", "subnormal_fraction", "overflow_fraction"]
# Per block-scaled recipe (rpsim grads' recipes.csv columns): elements its quantiser would flush to
# zero, clamp at the largest element or leave subnormal, of the tensor's non-zero finite entries.
PER_RECIPE = ["underflow_fraction", "saturated_fraction", "subnormal_fraction"]


class TelemetryError(RuntimeError):
    """Telemetry used out of order (a step with no gradients yet, a step after close())."""


def _num(v):
    return "" if v is None else repr(float(v)) if isinstance(v, float) else str(v)


class Telemetry:
    """model: any torch.nn.Module. formats: rpsim format names the gradients are cast to, and
    block-scaled policies (mxfp8, nvfp4, fp8-blockwise, ...: rpsim.recipe_effect) whose gradient
    quantiser is applied, as a what-if, to each whole tensor (blocks need every entry: not sampled).
    every: record every N-th step (others cost one integer compare per hooked module).
    sample: entries per tensor counted (uniform with replacement; None: all).
    scaler: a torch.cuda.amp.GradScaler or rpsim.torch.GradScaler (anything with get_scale()):
    its scale is already in the gradients, so they are cast as they are and histograms are
    unscaled; loss_scale: a number when the loop does not scale the loss (the cast multiplies
    by it); neither: scale 1. meta.json says which. out: the folder of steps.csv etc. (None:
    nothing written; .rows and .histogram_rows hold them). modules: names to hook (default:
    every leaf module and every module with parameters of its own). functional: also the
    outputs of matmul-class functions called in forward (attention's q @ k^T ...), named
    <module>.<function>#<i> after the innermost hooked module calling them."""

    def __init__(self, model, formats=("binary16", "bfloat16", "e4m3", "e5m2"), every=1, sample=65536, *,
                 scaler=None, loss_scale=None, out=None, modules=None, functional=True, dump_steps=(), seed=0):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"Telemetry: model must be a torch.nn.Module, not {type(model).__name__}")
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"Telemetry: every={every!r} must be a positive integer")
        if sample is not None and (not isinstance(sample, int) or sample < 1):
            raise ValueError(f"Telemetry: sample={sample!r} must be a positive integer or None")
        if scaler is not None and loss_scale is not None:
            raise ValueError("Telemetry: give scaler= or loss_scale=, not both")
        if scaler is not None and not callable(getattr(scaler, "get_scale", None)):
            raise TypeError(f"Telemetry: scaler {type(scaler).__name__} has no get_scale()")
        if loss_scale is not None and not (isinstance(loss_scale, (int, float)) and 0 < loss_scale < float("inf")):
            raise ValueError(f"Telemetry: loss_scale={loss_scale!r} must be a positive finite number")
        self.formats, self.recipes = formats_and_recipes(formats, "Telemetry")
        self.model, self.every, self.sample, self.scaler = model, every, sample, scaler
        self.fixed_scale = float(loss_scale) if loss_scale is not None else 1.0
        self.scale_source = (f"{type(scaler).__module__}.{type(scaler).__name__}.get_scale()" if scaler is not None
                             else "argument loss_scale" if loss_scale is not None else "none (scale 1)")
        self.out, self.dump_steps = out, set(dump_steps)
        if out is not None:  # before the first step, not after the run (OutputDirError)
            self.out = ensure_writable_dir(out, "rpsim.torch.Telemetry")
        self._written = None  # (steps rows, histogram rows) on disk; None: no file written yet
        self._meta = RunningMeta(self, "_write_running_meta") if out is not None else None
        named = dict(model.named_modules())
        # A model naming its layers (rpsim_layers: rpsim train's gpt) is hooked by them, each with every
        # parameter inside it, so its layer columns are the CLI's.
        groups = set(getattr(model, "rpsim_layers", ())) if modules is None else set()
        if modules is None:
            modules = list(model.rpsim_layers) if groups else \
                [n for n, m in named.items() if n and (not list(m.children()) or list(m.parameters(recurse=False)))]
        unknown = [n for n in modules if n not in named]
        if unknown:
            raise ValueError(f"Telemetry: no module named {unknown[0]!r} in the model")
        self.module_names = list(modules)
        self.params = {n: [(f"{n}.{pn}" if n else pn, p) for pn, p in named[n].named_parameters(recurse=n in groups)]
                       for n in named}
        self._gen = torch.Generator().manual_seed(seed)
        self.rows, self.histogram_rows, self.columns = [], [], None
        self._step, self._act, self._dump, self._handles, self._in_grad = 0, {}, {}, [], None
        for n in self.module_names:
            self._handles.append(named[n].register_forward_hook(self._forward_hook(n)))
        self.functional_names = None  # fixed at the first recorded step
        if functional:
            self._handles += attach_functional(self, named)

    # -- hooks ---------------------------------------------------------------------------------
    def _recording(self):
        return self._step % self.every == 0

    def _scales(self):
        """(factor already in the gradients, factor the cast applies)."""
        if self.scaler is not None:
            return float(self.scaler.get_scale()), 1.0
        return 1.0, self.fixed_scale

    def _forward_hook(self, name):
        def hook(module, inputs, output):
            if not self._recording() or not torch.is_grad_enabled():
                return
            t = output[0] if isinstance(output, (tuple, list)) and output else output
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(lambda g: self._on_grad(name, g))
        return hook

    def _on_grad(self, name, g):
        if self._in_grad is None:
            self._in_grad, _ = self._scales()
        self._count(self._act, name, g)

    def _count(self, store, name, g):
        if name not in store:
            store[name] = TensorStats(self.formats, self.recipes)
        in_grad, cast = (self._in_grad or 1.0), (1.0 if self.scaler is not None else self.fixed_scale)
        flat = sample_flat(g, self.sample, self._gen)
        store[name].add(flat, self.formats, cast, 1.0 / in_grad, g.dtype)
        if self.recipes:
            store[name].add_recipes(g, self.recipes, cast)
        if self._step in self.dump_steps:
            self._dump.setdefault(name, []).append(flat.float().cpu().numpy() / np.float32(in_grad))

    # -- the step --------------------------------------------------------------------------------
    def step(self, loss=None):
        """Call once per training step, after loss.backward() and before the optimizer (or
        scaler.step / unscale_) changes the gradients. loss: the step's loss, for the CSV."""
        if self._handles is None:
            raise TelemetryError("Telemetry.step() after close(): make a new Telemetry")
        if not self._recording():
            self._step += 1
            return
        self._in_grad, _ = self._scales()
        params, norm2, tracked, seen = {}, 0.0, set(self.module_names), set()
        for mod, plist in self.params.items():
            for pname, p in plist:
                if p.grad is not None:
                    if mod in tracked:
                        self._count(params, pname, p.grad)
                    if id(p) not in seen:  # (a group's parameters also sit under their own modules)
                        seen.add(id(p))
                        norm2 += float(p.grad.detach().double().pow(2).sum()) / self._in_grad ** 2
        if not params and not self._act:
            raise TelemetryError(
                f"Telemetry.step() at step {self._step}: the model has no gradients yet (no parameter has a "
                ".grad and no hooked module output received one); call it after loss.backward()")
        self._add_row(loss, params, norm2 ** 0.5)
        if self._step in self.dump_steps:
            self._write_dump()
        self._act, self._dump, self._in_grad = {}, {}, None
        self._step += 1
        self._write_new_rows()

    def _tensor_keys(self):
        keys = []
        for n in self.module_names:
            keys.append((f"{n}_activation_grad", "act", n))
            keys += [(f"{pname}_grad", "param", pname) for pname, _ in self.params[n]]
        if self.functional_names is None:
            self.functional_names = sorted(k for k in self._act if k not in self.module_names)
        keys += [(f"{n}_activation_grad", "act", n) for n in self.functional_names]
        return keys

    def _layer_cells(self, n, params):
        pstats = [params[p] for p, _ in self.params[n] if p in params]
        nz = sum(s.entries - s.zeros - s.nonfinite for s in pstats)
        ent = sum(s.entries for s in pstats)
        first = self.formats[0].name if self.formats else None
        if first is None:  # (only recipes asked for: the layer columns have no format to count in)
            w_under = None
        else:
            w_under = sum(s.under[first] for s in pstats) / nz if nz else (0.0 if pstats else None)
        w_nonf = sum(s.nonfinite for s in pstats) / ent if ent else (0.0 if pstats else None)
        a = self._act.get(n)
        a_under = a.fraction(a.under, first) if a and first else None
        a_nonf = a.nonfinite / a.entries if a and a.entries else (0.0 if a else None)
        return [w_under, w_nonf, a_under, a_nonf, None, None, None, None]

    def _add_row(self, loss, params, grad_norm):
        if self.columns is None:
            self.columns = list(HEAD)
            for n in self.module_names:
                self.columns += [f"{n}_{c}" for c in LAYER]
            for key, _, _ in self._tensor_keys():
                self.columns += [f"{key}_{f.name}_{c}" for f in self.formats for c in PER_FORMAT]
                self.columns += [f"{key}_{r}_{c}" for r in self.recipes for c in PER_RECIPE]
                self.columns += [f"{key}_zero_fraction", f"{key}_nonfinite_fraction", f"{key}_amax"]
        # The norm runs over every value of every parameter gradient: exact where the samples are not.
        nonfinite = not math.isfinite(grad_norm) or any(s.nonfinite for s in self._act.values())
        scale = self._in_grad if self.scaler is not None else self.fixed_scale
        loss_v = float(loss.detach()) if isinstance(loss, torch.Tensor) else loss
        cells = [self._step, None, loss_v, None, scale, int(nonfinite and self.scaler is not None), int(nonfinite),
                 grad_norm]
        for n in self.module_names:
            cells += self._layer_cells(n, params)
        for key, kind, name in self._tensor_keys():
            s = (self._act if kind == "act" else params).get(name)
            if s is None:
                cells += [None] * (len(PER_FORMAT) * len(self.formats) + len(PER_RECIPE) * len(self.recipes) + 3)
                continue
            for f in self.formats:
                cells += [s.fraction(s.under, f.name), s.fraction(s.sub, f.name), s.fraction(s.over, f.name)]
            for r in self.recipes:
                cells += s.recipe_fractions(r)
            cells += [s.zeros / s.entries if s.entries else 0.0, s.nonfinite / s.entries if s.entries else 0.0, s.amax]
            self._histogram(n_layer=name, tensor="activation_grad" if kind == "act" else "weight_grad", s=s)
        self.rows.append(cells)

    def _histogram(self, n_layer, tensor, s):
        pre = [self._step, n_layer, tensor, "pytorch"]
        if s.zeros:
            self.histogram_rows.append(pre + ["zero", s.zeros])
        if s.nonfinite:
            self.histogram_rows.append(pre + ["nonfinite", s.nonfinite])
        for b in sorted(s.hist):
            self.histogram_rows.append(pre + [b, s.hist[b]])

    def _write_dump(self):
        if self.out is None:
            return
        arrays = {}
        for name, parts in self._dump.items():
            group = "act_grad" if name in self._act else "param_grad"
            arrays[f"{group}/{name}"] = np.concatenate(parts).astype(np.float32)
        write_atomic(os.path.join(self.out, f"grads_step{self._step}.npz"), lambda f: np.savez(f, **arrays),
                     "rpsim.torch.Telemetry")

    # -- files -----------------------------------------------------------------------------------
    def _steps_text(self, rows):
        return "".join(",".join(_num(c) for c in r) + "\n" for r in rows)

    def _histogram_text(self, rows):
        return "".join(",".join(str(c) for c in r) + "\n" for r in rows)

    def _write_new_rows(self):
        """The rows recorded since the last write, added to steps.csv and histograms.csv (the first
        time: both files made afresh), and meta.json rewritten: what a Ctrl-C leaves is every step
        finished so far."""
        if self.out is None:
            return
        if self._written is None:
            self.flush(closed=False)
            return
        steps, hist = self._written
        append_text(os.path.join(self.out, "steps.csv"), self._steps_text(self.rows[steps:]),
                    "rpsim.torch.Telemetry")
        append_text(os.path.join(self.out, "histograms.csv"), self._histogram_text(self.histogram_rows[hist:]),
                    "rpsim.torch.Telemetry")
        self._written = (len(self.rows), len(self.histogram_rows))
        if self._meta.due():
            self._write_meta(closed=False)

    def _write_running_meta(self):
        self._write_meta(closed=False)

    def flush(self, closed=None):
        """Writes steps.csv, histograms.csv and meta.json (each atomically) when out= was given."""
        if self.out is None:
            return
        closed = self._handles is None if closed is None else closed
        cols = self.columns or list(HEAD)
        who = "rpsim.torch.Telemetry"
        write_atomic(os.path.join(self.out, "steps.csv"), ",".join(cols) + "\n" + self._steps_text(self.rows), who)
        write_atomic(os.path.join(self.out, "histograms.csv"), "step,layer,tensor,arithmetic,log2_abs_bin,count\n"
                     + self._histogram_text(self.histogram_rows), who)
        self._written = (len(self.rows), len(self.histogram_rows))
        self._write_meta(closed)
        self._meta.due()  # (the clock of the next replacement)
        self._meta.done = closed

    def _write_meta(self, closed):
        meta = {"source": "rpsim.torch.Telemetry", "torch_version": torch.__version__,
                "formats": [f.name for f in self.formats], "recipes": list(self.recipes), "every": self.every, "sample": self.sample,
                "loss_scale_source": self.scale_source, "modules": self.module_names,
                "steps_seen": self._step, "steps_recorded": len(self.rows), "closed": closed,
                "layer_underflow_format": self.formats[0].name if self.formats else None,
                "notes": "fractions of the non-zero finite values (rpsim grads' definitions); *_zero_fraction: "
                         "entries already zero (flushed or exactly zero) before the cast; histograms unscaled; "
                         "recipe columns: each whole tensor (not sampled) through the recipe's gradient "
                         "quantiser, 1-D blocks along the flattened tensor"}
        write_atomic(os.path.join(self.out, "meta.json"), json.dumps(meta, indent=2) + "\n", "rpsim.torch.Telemetry")

    def close(self):
        """Removes every hook (the model runs as without telemetry) and writes the files."""
        for h in self._handles or []:
            h.remove()
        self._handles = None
        self.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
