"""Notebooks 03 (underflow), 05 (accuracy) and 07 (transformer) on a user's own run folders
instead of a study's results: the study's tables (the same names and columns the notebooks read)
built from the files one training run writes -- steps.csv, histograms.csv, evaluations.csv and
meta.json, as `rpsim train --out`, rpsim.torch.Trainer(out=...) and rpsim.torch.Telemetry(out=...)
write them. The notebooks import this module when RPSIM_RUN is set (folders separated by ':').

What a run cannot give is left empty (NaN), never invented: a Telemetry run has no FP64 shadow
(no loss_fp64_nats, no weight distance) and no evaluations; the notebooks say so where a panel
needs them. The per-step means over layers skip empty cells, as the transformer study's do."""
import json
import math
import os
import pathlib

import numpy as np
import pandas as pd

# binary16: exponent of the smallest subnormal (2^-24), emin and emax; the rule of the studies'
# binned_cast (experiments/studies/src/underflow_fig3.cpp), binade by binade.
FP16_SMALLEST, FP16_EMIN, FP16_EMAX = -24, -14, 15
REQUIRED = ("steps.csv", "histograms.csv", "meta.json")


class RunFolderError(ValueError):
    """A folder named in RPSIM_RUN that is not a run folder."""


def binned_cast(bins, log2_scale):
    """(underflow, subnormal, overflow) counts of a {binade: count} histogram scaled by 2^k in fp16:
    a binade entirely at most half the smallest subnormal flushes, one below 2^emin is subnormal,
    one above emax overflows."""
    under = sub = over = 0
    for e, n in bins.items():
        s = e + log2_scale
        if s + 1 <= FP16_SMALLEST - 1:
            under += n
        elif s < FP16_EMIN:
            sub += n
        elif s > FP16_EMAX:
            over += n
    return under, sub, over


class Run:
    """One run folder: label, meta, source, steps, hist, evals (None without evaluations.csv)."""

    def __init__(self, path, label):
        self.path, self.label = path, label
        missing = [n for n in REQUIRED if not (path / n).exists()]
        if missing:
            raise RunFolderError(f"RPSIM_RUN: {path} has no {', '.join(missing)}: not a run folder of rpsim train, "
                                 "rpsim.torch.Trainer or rpsim.torch.Telemetry")
        try:
            self.meta = json.loads((path / "meta.json").read_text())
        except json.JSONDecodeError as e:
            raise RunFolderError(f"RPSIM_RUN: {path}/meta.json is not JSON ({e})") from None
        self.source = self.meta.get("source") or self.meta.get("front_end") or "rpsim train"
        self.steps = pd.read_csv(path / "steps.csv")
        for col in ("step", "loss_emulated_nats", "loss_scale"):
            if col not in self.steps:
                raise RunFolderError(f"RPSIM_RUN: {path}/steps.csv has no column {col!r}")
        self.hist = pd.read_csv(path / "histograms.csv", dtype={"log2_abs_bin": str})
        ev = path / "evaluations.csv"
        self.evals = pd.read_csv(ev) if ev.exists() else None
        if self.evals is not None and not len(self.evals):
            self.evals = None
        policy = self.meta.get("policy")
        self.policy = policy.get("name", "?") if isinstance(policy, dict) else policy or (
            "pytorch (measured)" if self.source == "rpsim.torch.Telemetry" else "?")
        scaler = self.meta.get("loss_scaler")
        self.scaler = scaler.get("policy", "?") if isinstance(scaler, dict) else self.meta.get("loss_scale_source", "?")
        self.shadow = "loss_fp64_nats" in self.steps and self.steps.loss_fp64_nats.notna().any()

    def columns(self, suffix):
        """{layer: column} of the per-layer columns ending in _suffix."""
        return {c[:-len(suffix) - 1]: c for c in self.steps.columns if c.endswith("_" + suffix)}

    def layer_mean(self, suffix):
        """Per step, the mean over layers of the non-empty cells (NaN where all are empty)."""
        cols = list(self.columns(suffix).values())
        if not cols:
            return pd.Series(np.nan, index=self.steps.index)
        return self.steps[cols].mean(axis=1, skipna=True)

    def histogram_arithmetic(self):
        """The FP64 shadow's histograms where the run has them (Fig. 3 histograms fp32 training's),
        else the run's own ("emulated", or "pytorch" for Telemetry: unscaled)."""
        arith = list(dict.fromkeys(self.hist.arithmetic))
        return "fp64" if "fp64" in arith else (arith[0] if arith else None)

    def describe(self):
        text = (f"{self.label}: {self.path} ({self.source}), {len(self.steps)} steps, policy {self.policy}, "
                f"loss scale from {self.scaler}, FP64 shadow {'yes' if self.shadow else 'no'}, "
                f"evaluations {len(self.evals) if self.evals is not None else 'none'}")
        if self.source == "rpsim.torch.Telemetry":
            # Telemetry watches a real run: its per-layer underflow is what a cast would flush.
            text += (f"; its per-layer underflow is what a cast of its gradients to "
                     f"{self.meta.get('layer_underflow_format', 'binary16')} at its loss scale would flush")
        return text


def load(spec):
    """The run folders of RPSIM_RUN (separated by os.pathsep), each labelled by its folder name
    (with its parent's where two share a name)."""
    given = [pathlib.Path(p).expanduser() for p in str(spec).split(os.pathsep) if p.strip()]
    paths = [p.resolve() for p in given]
    if not paths:
        raise RunFolderError("RPSIM_RUN is empty: give one run folder, or several separated by ':'")
    for g, p in zip(given, paths):
        if not p.is_dir():
            # A notebook runs in notebooks/: a relative folder is read from there (render.sh reads it
            # from the folder it is called in).
            where = "" if g.is_absolute() else f" ({g} read from {pathlib.Path.cwd()}: give an absolute path)"
            raise RunFolderError(f"RPSIM_RUN: {p} is not a folder{where}")
    names = [p.name for p in paths]
    labels = [p.name if names.count(p.name) == 1 else f"{p.parent.name}/{p.name}" for p in paths]
    return [Run(p, label) for p, label in zip(paths, labels)]


def meta(runs):
    """What the notebooks read from a study's meta.json, for a set of runs."""
    return {"study": "user runs", "quick": False, "synthetic_data": False,
            "data_set": "run folders: " + ", ".join(f"{r.label} ({r.source})" for r in runs),
            "runs": [r.describe() for r in runs]}


def _histograms(frame):
    """{(step, layer, tensor): (zeros, nonfinite, {binade: count})} of histogram rows."""
    out = {}
    for (step, layer, tensor), g in frame.groupby(["step", "layer", "tensor"], sort=False):
        bins = g[~g.log2_abs_bin.isin(["zero", "nonfinite"])]
        out[(int(step), layer, tensor)] = (int(g[g.log2_abs_bin == "zero"]["count"].sum()),
                                           int(g[g.log2_abs_bin == "nonfinite"]["count"].sum()),
                                           dict(zip(bins.log2_abs_bin.astype(int), bins["count"].astype(int))))
    return out


def _recovering(bins):
    """The scales 2^k, k = 0..40, at which nothing overflows and the fewest values flush: lo, hi, flushed."""
    lo = hi = best = -1
    for k in range(41):
        under, _, over = binned_cast(bins, k)
        if over:
            continue
        if best < 0 or under < best:
            lo = hi = k
            best = under
        elif under == best and hi == k - 1:
            hi = k
    return lo, hi, best


def _fig3_rows(run, hist_rows, summary_rows):
    """fig3_histogram.csv and fig3_summary.csv rows of one run: its last histogram step, each layer's
    activation gradients and the whole model's ("all")."""
    arith = run.histogram_arithmetic()
    h = run.hist[(run.hist.arithmetic == arith) & (run.hist.tensor == "activation_grad")]
    if not len(h):
        return
    step = int(h.step.max())
    layers = _histograms(h[h.step == step])
    total = [0, 0, {}]
    named = [(layer, v) for (_, layer, _), v in layers.items()]
    for layer, (zeros, nonfinite, bins) in named:
        total[0] += zeros
        total[1] += nonfinite
        for e, n in bins.items():
            total[2][e] = total[2].get(e, 0) + n
    for layer, (zeros, nonfinite, bins) in named + [("all", tuple(total))]:
        entries = zeros + nonfinite + sum(bins.values())
        if not entries:
            continue
        hist_rows.append((run.label, arith, step, layer, "zero", zeros, zeros / entries))
        if nonfinite:
            hist_rows.append((run.label, arith, step, layer, "nonfinite", nonfinite, nonfinite / entries))
        hist_rows += [(run.label, arith, step, layer, str(e), n, n / entries) for e, n in sorted(bins.items())]
        nonzero = sum(bins.values())
        under, sub, _ = binned_cast(bins, 0)
        lo, hi, best = _recovering(bins)
        frac = (lambda n: n / nonzero) if nonzero else (lambda n: 0.0)
        summary_rows.append((run.label, arith, step, layer, entries, zeros / entries, under / entries, frac(under),
                             frac(sub), lo, hi, frac(best)))


def _predicted(run):
    """predicted.csv of one run: per histogram step and tensor, what a loss scale 2^k would flush to
    zero or overflow in fp16, from the magnitudes of its reference histograms (underflow.cpp)."""
    arith = run.histogram_arithmetic()
    rows = []
    for (step, tensor), g in run.hist[run.hist.arithmetic == arith].groupby(["step", "tensor"], sort=True):
        bins = {}
        for (_, _, _), (_, _, b) in _histograms(g).items():
            for e, n in b.items():
                bins[e] = bins.get(e, 0) + n
        nonzero = sum(bins.values())
        for k in range(25):
            under, _, over = binned_cast(bins, k)
            rows.append((run.label, int(step), tensor, k, 2.0 ** k, nonzero,
                         under / nonzero if nonzero else math.nan, over / nonzero if nonzero else math.nan))
    return rows


def underflow_tables(runs):
    """Notebook 03's tables. summary.csv: one row per run, at the loss scale of its first recorded
    step (static_scale: that scale; loss_scale: the run's label); underflow.csv: the per-layer
    fractions of steps.csv; predicted.csv: from the first run's histograms."""
    fig3h, fig3s, under_rows, summary_rows = [], [], [], []
    for r in runs:
        _fig3_rows(r, fig3h, fig3s)
        s = r.steps
        for tensor in ("activation_grad", "weight_grad"):
            under, nonf = r.columns(f"{tensor}_underflow_fraction"), r.columns(f"{tensor}_nonfinite_fraction")
            for layer, col in under.items():
                for i in s.index:
                    under_rows.append((r.label, float(s.loss_scale.iloc[0]), int(s.step[i]), float(s.loss_scale[i]),
                                       layer, tensor, s.at[i, col],
                                       s.at[i, nonf[layer]] if layer in nonf else math.nan))
        act, wgt = r.layer_mean("activation_grad_underflow_fraction"), r.layer_mean("weight_grad_underflow_fraction")
        overflow = int(s.overflow_found.sum()) if "overflow_found" in s else 0
        skipped = int(s.skipped.sum()) if "skipped" in s else 0
        last = r.evals.iloc[-1] if r.evals is not None else {}
        summary_rows.append((r.label, float(s.loss_scale.iloc[0]), len(s), act.iloc[0], wgt.iloc[0], act.mean(),
                             wgt.mean(), overflow, skipped, last.get("test_accuracy_emulated_percent", math.nan),
                             last.get("test_accuracy_fp64_percent", math.nan)))
    return {
        "fig3_histogram.csv": pd.DataFrame(fig3h, columns=["source", "arithmetic", "step", "layer", "log2_abs_bin",
                                                               "count", "fraction_of_entries"]),
        "fig3_summary.csv": pd.DataFrame(fig3s, columns=[
            "source", "arithmetic", "step", "layer", "entries", "exact_zero_fraction", "fp16_zero_fraction",
            "fp16_zero_fraction_of_nonzero", "fp16_subnormal_fraction_of_nonzero", "recovering_min_log2_scale",
            "recovering_max_log2_scale", "underflow_fraction_of_nonzero_at_recovering_scales"]),
        "underflow.csv": pd.DataFrame(under_rows, columns=["loss_scale", "static_scale", "step", "applied_scale",
                                                           "layer", "tensor", "underflow_fraction",
                                                           "nonfinite_fraction"]),
        "predicted.csv": pd.DataFrame(_predicted(runs[0]), columns=[
            "run", "step", "tensor", "log2_scale", "scale", "fp64_nonzero_count", "underflow_fraction",
            "overflow_fraction"]),
        "summary.csv": pd.DataFrame(summary_rows, columns=[
            "loss_scale", "static_scale", "steps", "activation_grad_underflow_step0", "weight_grad_underflow_step0",
            "activation_grad_underflow_mean", "weight_grad_underflow_mean", "overflow_steps", "skipped_steps",
            "test_accuracy_percent", "fp64_test_accuracy_percent"]),
    }


def _last_eval(run, column):
    return float(run.evals[column].iloc[-1]) if run.evals is not None and column in run.evals else math.nan


def _fp8_rows(run):
    """fp8.csv rows of one run: per step and FP8-quantised tensor (<layer>.<x|w|dy>), the columns
    <tensor>_fp8_amax / _saturated_fraction / _flushed_fraction of steps.csv and its scale: a
    per-tensor run's <tensor>_fp8_scale (scale_min = scale_max = scale), a block-scaled run's (MX,
    NVFP4) smallest and largest block scale <tensor>_fp8_scale_min / _scale_max (scale empty)."""
    rows, s = [], run.steps
    for col in s.columns:
        if not col.endswith("_fp8_amax"):
            continue
        t = col[:-len("_fp8_amax")]
        if t + "_fp8_scale" in s:
            scale = lo = hi = s[t + "_fp8_scale"]
        elif t + "_fp8_scale_min" in s and t + "_fp8_scale_max" in s:
            scale, lo, hi = pd.Series(math.nan, index=s.index), s[t + "_fp8_scale_min"], s[t + "_fp8_scale_max"]
        else:
            raise RunFolderError(f"RPSIM_RUN: {run.path}/steps.csv has {col} but neither {t}_fp8_scale nor "
                                 f"{t}_fp8_scale_min and {t}_fp8_scale_max")
        for i in s.index:
            rows.append((run.label, run.policy, int(s.step[i]), t, s.at[i, col], scale[i], lo[i], hi[i],
                         s.at[i, t + "_fp8_saturated_fraction"], s.at[i, t + "_fp8_flushed_fraction"]))
    return rows


def accuracy_tables(runs):
    """Notebook 05's tables (accuracy.cpp's columns): curves.csv per step, evaluations.csv, summary.csv
    (the last step's distance, the last evaluation's accuracies) and, where a run has FP8 columns, fp8.csv."""
    curves, evals, summary, fp8 = [], [], [], []
    for r in runs:
        s = r.steps
        dist, stalled = r.layer_mean("weight_rel_distance_from_fp64"), r.layer_mean("weight_update_stalled_fraction")
        epoch = s.epoch if "epoch" in s else pd.Series(0, index=s.index)
        fp64 = s.loss_fp64_nats if "loss_fp64_nats" in s else pd.Series(math.nan, index=s.index)
        skipped = s.skipped if "skipped" in s else pd.Series(0, index=s.index)
        curves += list(zip([r.label] * len(s), [r.policy] * len(s), s.step, epoch, s.loss_emulated_nats, fp64,
                           dist, stalled, skipped))
        if r.evals is not None:
            e = r.evals
            evals += list(zip([r.label] * len(e), e.step, e.epoch, e.test_accuracy_emulated_percent,
                              e.test_accuracy_fp64_percent))
        acc, acc64 = _last_eval(r, "test_accuracy_emulated_percent"), _last_eval(r, "test_accuracy_fp64_percent")
        summary.append((r.label, r.policy, len(s), int(skipped.sum()), float(s.loss_emulated_nats.iloc[-1]),
                        float(dist.iloc[-1]), float(stalled.mean()), acc, acc64, acc - acc64))
        fp8 += _fp8_rows(r)
    tables = {
        "curves.csv": pd.DataFrame(curves, columns=["run", "policy", "step", "epoch", "loss_emulated_nats",
                                                    "loss_fp64_nats", "weight_rel_distance_from_fp64",
                                                    "weight_update_stalled_fraction", "skipped"]),
        "evaluations.csv": pd.DataFrame(evals, columns=["run", "step", "epoch", "test_accuracy_percent",
                                                        "fp64_test_accuracy_percent"]),
        "summary.csv": pd.DataFrame(summary, columns=[
            "run", "policy", "steps", "skipped_steps", "final_loss_nats", "final_weight_rel_distance_from_fp64",
            "weight_update_stalled_fraction_mean", "test_accuracy_percent", "fp64_test_accuracy_percent",
            "accuracy_gap_points"]),
    }
    if fp8:
        tables["fp8.csv"] = pd.DataFrame(fp8, columns=["run", "policy", "step", "tensor", "amax", "scale",
                                                       "scale_min", "scale_max", "saturated_fraction",
                                                       "flushed_fraction"])
    return tables


def transformer_tables(runs):
    """Notebook 07's tables (transformer.cpp's columns): the validation loss is the runs' test loss."""
    curves, evals, summary = [], [], []
    for r in runs:
        s = r.steps
        act, wgt = r.layer_mean("activation_grad_underflow_fraction"), r.layer_mean("weight_grad_underflow_fraction")
        fp64 = s.loss_fp64_nats if "loss_fp64_nats" in s else pd.Series(math.nan, index=s.index)
        skipped = s.skipped if "skipped" in s else pd.Series(0, index=s.index)
        curves += list(zip([r.label] * len(s), s.step, s.loss_emulated_nats, fp64, s.loss_scale, skipped, act, wgt))
        if r.evals is not None:
            e = r.evals
            evals += list(zip([r.label] * len(e), e.step, e.test_loss_emulated_nats, e.test_loss_fp64_nats))
        val, val64 = _last_eval(r, "test_loss_emulated_nats"), _last_eval(r, "test_loss_fp64_nats")
        summary.append((r.label, r.policy, r.scaler, len(s), int(skipped.sum()), val, val64, val - val64,
                        float(act.mean())))
    return {
        "curves.csv": pd.DataFrame(curves, columns=["run", "step", "loss_emulated_nats", "loss_fp64_nats",
                                                    "loss_scale", "skipped", "activation_grad_underflow_fraction_mean",
                                                    "weight_grad_underflow_fraction_mean"]),
        "evaluations.csv": pd.DataFrame(evals, columns=["run", "step", "val_loss_emulated_nats", "val_loss_fp64_nats"]),
        "summary.csv": pd.DataFrame(summary, columns=[
            "run", "policy", "loss_scaler", "steps", "skipped_steps", "val_loss_emulated_nats", "val_loss_fp64_nats",
            "val_loss_gap_nats", "activation_grad_underflow_fraction_mean"]),
    }


TABLES = {"underflow": underflow_tables, "accuracy": accuracy_tables, "transformer": transformer_tables}


def tables(study, runs):
    """The tables notebook `study` reads, built from `runs`."""
    if study not in TABLES:
        raise ValueError(f"user_runs: notebook of study {study!r} does not draw run folders "
                         f"(those that do: {', '.join(TABLES)})")
    return TABLES[study](runs)
