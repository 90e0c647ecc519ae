"""Notebooks 05 (accuracy) and 07 (transformer): the training studies'
cell sources, called from make_notebooks.py with its shared setup cells."""


def accuracy(setup, SAVE, COMPARE):
    return [
    ("md", """# 05 · Accuracy: how close to fp32 and to an FP64 shadow does each precision policy train?

Gupta et al. (*Deep Learning with Limited Numerical Precision*, ICML 2015) showed that 16-bit training
matches fp32 with stochastic rounding but stalls with round-to-nearest; Zamirai et al. (*Revisiting BFloat16
Training*, arXiv:2010.06192, 2020) showed that pure bf16 training loses accuracy because nearest-rounded
weight updates vanish, and that stochastic rounding or Kahan-compensated updates recover fp32 accuracy.
The same MLP, initial weights and data order are trained under fp32, fp16-amp, bf16-amp, bf16-pure with
nearest and stochastic update rounding, bf16 with Kahan updates and FP8 with delayed scaling; every run
has an FP64 shadow, so each curve also shows how far the weights drift from exact arithmetic.

Tables: `curves.csv`, `evaluations.csv`, `summary.csv` written by `rpsim study accuracy`.

Your own run: set `RPSIM_RUN` to a run folder (several: separated by `:`) that `rpsim train --out`,
`rpsim.torch.Trainer(..., out=DIR)` or `rpsim.torch.Telemetry(model, out=DIR)` wrote; the same tables are then built
from its `steps.csv`, `evaluations.csv` and `meta.json` (`user_runs.py`), one curve per folder, and the figure is
saved as `05-accuracy-run.png`. A run without an FP64 shadow or without evaluations (Telemetry records a real run:
neither) is drawn without them, and the panel that needs them says so."""),
    ("code", setup("accuracy", "05-accuracy.png", runs=True)),
    ("code", """curves = csv("curves.csv")
evals = csv("evaluations.csv")
summary = csv("summary.csv")
summary"""),
    ("code", """fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
def missing(ax, text):
    # A panel whose data the runs do not have says so, on the figure and in the output.
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9)
    print(ax.get_title() or "panel", "-", text.replace("\\n", " "))
no_shadow = []
for run, g in curves.groupby("run", sort=False):
    w = max(1, len(g) // 40)
    axes[0].plot(g.step, g.loss_emulated_nats.rolling(w, min_periods=1).mean(), label=run)
    if g.weight_rel_distance_from_fp64.notna().any():
        axes[1].plot(g.step, g.weight_rel_distance_from_fp64.clip(lower=1e-12), label=run)
    else:
        no_shadow.append(run)
axes[0].set_xlabel("step"); axes[0].set_ylabel("training loss (nats, smoothed)"); axes[0].set_title("(a) training loss")
axes[1].set_yscale("log"); axes[1].set_xlabel("step"); axes[1].set_ylabel("||w - w_fp64|| / ||w_fp64|| (mean over layers)")
axes[1].set_title("(b) distance from the FP64 shadow")
if no_shadow:
    missing(axes[1], "no FP64 shadow in\\n" + "\\n".join(no_shadow) + "\\n(no weight_rel_distance_from_fp64 values)")
axes[0].legend(fontsize=7)
if len(no_shadow) < len(summary):
    axes[1].legend(fontsize=7)
ax = axes[2]
x = np.arange(len(summary))
ax.bar(x, summary.test_accuracy_percent, color="tab:blue", label="policy")
ax.plot(x, summary.fp64_test_accuracy_percent, "k_", ms=20, mew=2, label="its FP64 shadow")
ax.set_xticks(x); ax.set_xticklabels(summary.run, rotation=45, ha="right")
lo = min(summary.test_accuracy_percent.min(), summary.fp64_test_accuracy_percent.min())
ax.set_ylim(max(0, lo - 5) if np.isfinite(lo) else 0, 100); ax.set_ylabel("test accuracy %"); ax.set_title("(c) final test accuracy"); ax.legend(fontsize=7)
unscored = list(summary.run[summary.test_accuracy_percent.isna()])
if unscored:
    missing(ax, "no evaluations (evaluations.csv) in\\n" + "\\n".join(unscored))
fig.tight_layout()"""),
    ("code", SAVE),
    ("md", """## FP8 scaling: delayed against current

Transformer Engine's delayed scaling quantises each matmul input with a scale computed from the amax
history of earlier steps (`amax_history_len`, `amax_compute_algo`); current scaling uses the amax of the
tensor in hand. `fp8.csv` holds, per step and FP8-quantised tensor (`fc0.x` a layer's input, `fc0.w` its
weight, `fc0.dy` the gradient arriving at it, e4m3 forward and e5m2 backward), the tensor's amax, the scale
used, and the fractions of entries clamped at the format's largest finite value (saturated) and of nonzero
entries quantised to zero (flushed); the `fp8-current` run is trained for this table only. Zero fractions
are drawn at the floor 1e-7."""),
    ("code", """fp8 = csv("fp8.csv") if has("fp8.csv") else None
if fp8 is None:
    print("no fp8.csv: " + ("no run folder has FP8 columns (<layer>.<x|w|dy>_fp8_amax)" if RUN_MODE
                            else "the study config runs no FP8 policy"))
else:
    if "scale_min" not in fp8:  # the study's fp8.csv: per-tensor scales only
        fp8["scale_min"] = fp8["scale_max"] = fp8["scale"]
    tensors = list(dict.fromkeys(fp8.tensor))
    # One colour per tensor, however many a model quantises (tab10 has 10; a GPT block alone has 12).
    palette = (plt.cm.tab10.colors if len(tensors) <= 10 else plt.cm.tab20.colors if len(tensors) <= 20
               else [tuple(c) for c in plt.cm.turbo(np.linspace(0, 1, len(tensors)))])
    colours = dict(zip(tensors, palette))
    dashes = ["-", "--", ":", "-."]
    styles = {run: dashes[i % len(dashes)] for i, run in enumerate(dict.fromkeys(fp8.run))}
    # A block-scaled run (MX, NVFP4) has no one scale per tensor: its smallest and largest block scale.
    blocks = fp8.groupby(["run", "tensor"], sort=False).scale.apply(lambda v: v.isna().all())
    fig, axes = plt.subplots(2, 2, figsize=(15, 9), sharex=True)
    panels = [("amax", "amax (max |entry|)", "(a) amax per step"),
              ("scale", "scale in use (x * scale is quantised)",
               "(b) per-tensor scale" + ("; block-scaled: largest block scale, shaded down to the smallest"
                                         if blocks.any() else "")),
              ("saturated_fraction", "entries clamped at max finite (floor 1e-7)", "(c) saturated fraction"),
              ("flushed_fraction", "nonzero entries quantised to 0 (floor 1e-7)", "(d) flushed fraction")]
    for ax, (col, ylabel, title) in zip(axes.flat, panels):
        for (run, tensor), g in fp8.groupby(["run", "tensor"], sort=False):
            block = col == "scale" and blocks[(run, tensor)]
            y = g.scale_max if block else g[col] if col in ("amax", "scale") else g[col].clip(lower=1e-7)
            ax.plot(g.step, y, styles[run], color=colours[tensor], lw=1.2, marker="o", ms=2)
            if block:
                ax.fill_between(g.step, g.scale_min, g.scale_max, color=colours[tensor], alpha=0.15, lw=0)
        ax.set_yscale("log"); ax.set_ylabel(ylabel); ax.set_title(title, fontsize=9 if col == "scale" else None)
    for ax in axes[1]:
        ax.set_xlabel("step")
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=colours[t], label=t) for t in tensors]
    handles += [Line2D([], [], color="k", ls=ls, label=run) for run, ls in styles.items()]
    fig.legend(handles=handles, fontsize=8, loc="center right", ncol=1 + len(handles) // 40)
    fig.suptitle("FP8 telemetry: " + (", ".join(styles) if RUN_MODE else "delayed vs current per-tensor scaling"))
    fig.tight_layout(rect=(0, 0, 0.88 - 0.08 * (len(handles) // 40), 1))
    fig.savefig(FIGURE.with_name(FIGURE.stem + "-fp8.png"), dpi=120, bbox_inches="tight")
    print("saved", FIGURE.with_name(FIGURE.stem + "-fp8.png"))
    summary_fp8 = fp8.groupby(["run", "tensor"], sort=False)[["amax", "scale", "scale_min", "scale_max", "saturated_fraction", "flushed_fraction"]].agg(["min", "max"])
    display(summary_fp8)"""),
    ("md", "## Measured next to published"),
    ("code", COMPARE + """

acc = dict(zip(summary.run, summary.test_accuracy_percent))
dist = dict(zip(summary.run, summary.final_weight_rel_distance_from_fp64))
def gap(a, b):
    return f"{acc[a] - acc[b]:+.2f} points" if a in acc and b in acc else "n/a"
rows = [
    ("bf16-pure RNE minus fp32 accuracy", gap("bf16-pure-rne", "fp32"), "below fp32 (RNE updates vanish)", "Zamirai et al. 2020"),
    ("bf16-pure SR minus fp32 accuracy", gap("bf16-pure-sr", "fp32"), "close to fp32", "Zamirai et al. 2020; Gupta et al. 2015"),
    ("bf16-kahan minus fp32 accuracy", gap("bf16-kahan", "fp32"), "close to fp32", "Zamirai et al. 2020"),
    ("fp16-amp minus fp32 accuracy", gap("fp16-amp", "fp32"), "matches fp32", "Micikevicius et al. 2018"),
]
for run in summary.run:
    rows.append((f"{run}: weight distance from FP64 shadow", f"{dist[run]:.3g}", "-", "(this simulator)"))
compare(rows);"""),
]


def transformer(setup, SAVE, COMPARE):
    return [
    ("md", """# 07 · Transformer: does a small GPT train in fp16 without loss scaling?

Micikevicius et al. (*Mixed Precision Training*, ICLR 2018) found that fp16 training without loss scaling
fails or degrades on some networks (SSD, Fig. 3: 67% of activation-gradient values become zero in fp16),
and that a loss scale recovers them. rpsim trains a character-level GPT (nanoGPT's layout: token and
position embeddings, pre-LayerNorm blocks of causal self-attention and a GELU MLP, residual adds, a tied
output projection; AdamW with warmup and cosine decay, clipping at 1) on Debian's `fortunes` text under
fp32, fp16 autocast with PyTorch's dynamic loss scaler, the same without any scaling, bf16 autocast and FP8
(delayed scaling), each beside an FP64 shadow trained in lockstep from the same weights and batches.
Validation loss (nats per character) is measured every few steps on held-out text, in the run's own
precision and in the shadow's.

Tables: `curves.csv`, `evaluations.csv`, `summary.csv` written by `rpsim study transformer`.

Your own run: set `RPSIM_RUN` to a run folder (several: separated by `:`) that `rpsim train --out`,
`rpsim.torch.Trainer(..., out=DIR)` or `rpsim.torch.Telemetry(model, out=DIR)` wrote; the same tables are then built
from its `steps.csv`, `evaluations.csv` and `meta.json` (`user_runs.py`), one curve per folder, and the figure is
saved as `07-transformer-run.png`. A run without an FP64 shadow or without evaluations (Telemetry records a real run:
neither) is drawn without them, and the panel that needs them says so.
Panel (a) draws a run's test loss as its validation loss."""),
    ("code", setup("transformer", "07-transformer.png", runs=True)),
    ("code", """curves = csv("curves.csv")
evals = csv("evaluations.csv")
summary = csv("summary.csv")
synthetic = meta.get("synthetic_data", False)
print(meta.get("data_set", ""))
summary"""),
    ("code", """runs = list(summary.run)
colours = dict(zip(runs, plt.cm.tab10.colors))
fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
ax = axes[0]
for run, g in evals.groupby("run", sort=False):
    ax.plot(g.step, g.val_loss_emulated_nats, "-o", ms=3, color=colours[run], label=run)
    if g.val_loss_fp64_nats.notna().any():
        ax.plot(g.step, g.val_loss_fp64_nats, ":", color=colours[run], lw=1)
ax.set_xlabel("step"); ax.set_ylabel("validation loss (nats/char)")
ax.set_title("(a) validation loss; dotted: each run's FP64 shadow")
unscored = [r for r in runs if r not in set(evals.run)]
if unscored:
    ax.text(0.5, 0.5, "no evaluations (evaluations.csv) in\\n" + "\\n".join(unscored), ha="center", va="center",
            transform=ax.transAxes, fontsize=9)
    print("(a): no evaluations in", ", ".join(unscored))
no_shadow = [r for r, g in curves.groupby("run", sort=False) if not g.loss_fp64_nats.notna().any()]
if no_shadow:
    print("no FP64 shadow (no loss_fp64_nats) in", ", ".join(no_shadow))
if len(evals):
    ax.legend(fontsize=7)
ax = axes[1]
for run, g in curves.groupby("run", sort=False):
    w = max(1, len(g) // 40)
    ax.plot(g.step, g.loss_emulated_nats.rolling(w, min_periods=1).mean(), color=colours[run], label=run)
ax.set_xlabel("step"); ax.set_ylabel("training loss (nats/char, smoothed)"); ax.set_title("(b) training loss")
ax.legend(fontsize=7)
ax = axes[2]
# A run that never flushes sits on the floor; the legend says which, so no
# line is hidden under another without saying so.
for run, g in curves.groupby("run", sort=False):
    none = not (g.activation_grad_underflow_fraction_mean > 0).any()
    ax.plot(g.step, g.activation_grad_underflow_fraction_mean.clip(lower=1e-7), color=colours[run],
            ls=":" if none else "-", label=run + (" (none: on the floor)" if none else ""))
ax.set_yscale("log"); ax.set_xlabel("step")
ax.set_ylabel("act.-grad entries flushed to 0\\n(mean over layers; floor 1e-7)")
ax.set_title("(c) gradient underflow per step")
ax.legend(fontsize=7)
title = "your runs: " + ", ".join(runs) if RUN_MODE else \
        "character-level GPT on " + ("SYNTHETIC text" if synthetic else "Debian's fortunes")
fig.suptitle(title)
fig.tight_layout()"""),
    ("code", SAVE),
    ("md", "## Measured next to published"),
    ("code", COMPARE + """

val = dict(zip(summary.run, summary.val_loss_emulated_nats))
shadow = dict(zip(summary.run, summary.val_loss_fp64_nats))
under = dict(zip(summary.run, summary.activation_grad_underflow_fraction_mean))
def diff(a, b):
    return f"{val[a] - val[b]:+.4f} nats" if a in val and b in val else "n/a"
rows = [
    ("fp16 no scaling minus fp32, validation loss", diff("fp16-amp-noscale", "fp32"), "fails or degrades on some networks", "Micikevicius et al. 2018"),
    ("fp16 dynamic scaling minus fp32", diff("fp16-amp", "fp32"), "matches fp32", "Micikevicius et al. 2018"),
    ("bf16-amp minus fp32", diff("bf16-amp", "fp32"), "matches fp32", "Kalamkar et al. 2019"),
    ("fp8 minus fp32", diff("fp8", "fp32"), "close to fp16/bf16", "Micikevicius et al. 2022"),
]
for run in summary.run:
    rows.append((f"{run}: activation gradients flushed per step", f"{100 * under[run]:.3g}%", "67% (SSD, fp16, no scaling)" if run == "fp16-amp-noscale" else "-", "Micikevicius et al. 2018, Fig. 3"))
compare(rows);"""),
]
