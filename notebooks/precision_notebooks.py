"""Notebooks 03 (underflow, Micikevicius et al. 2018 Fig. 3) and 08 (fixed
point, Gupta et al. 2015 Fig. 2): cell sources, called from make_notebooks.py
with its shared setup cells."""

# The fp16 range marked on every Fig. 3 histogram: below half the smallest
# subnormal a value rounds to 0; [2^-24, 2^-14) is subnormal; from 65520 up
# it overflows. Bins are binades [2^e, 2^(e+1)).
FP16_REGIONS = '''def fp16_regions(ax):
    """Shades where fp16 flushes to zero, keeps subnormals, and overflows."""
    ax.axvspan(-60, -25, color="tab:red", alpha=0.08, lw=0)
    ax.axvspan(-25, -14, color="tab:orange", alpha=0.12, lw=0)
    ax.axvspan(16, 40, color="0.5", alpha=0.15, lw=0)
    for x, text in [(-24, "fp16 min subnormal 2^-24"), (-14, "fp16 min normal 2^-14"), (16, "beyond 65504")]:
        ax.axvline(x, color="0.3", ls=":", lw=0.8)
        ax.text(x + 0.3, 0.97, text, transform=ax.get_xaxis_transform(), fontsize=7, va="top", rotation=90)'''


def underflow(setup, SAVE, COMPARE):
    return [
    ("md", """# 03 · Underflow: how many fp16 gradients vanish, and how many does each loss scale recover?

Micikevicius et al. (*Mixed Precision Training*, ICLR 2018, Sec. 3.2, Fig. 3) histogrammed the activation
gradients of the Multibox SSD detector trained in fp32, by binade with a separate bin for zeros. Their caption
gives 67% of the values in the zero bin (exactly zero, mostly behind ReLUs); their text adds that much of
the rest lay below fp16's smallest subnormal (2^-24) and would become zero in fp16, and that a loss scale of
8 was enough for SSD (values below 2^-27 did not matter, those in [2^-27, 2^-24) did).

Here the same histogram (`fig3_histogram.csv`, from the FP64 shadow) for the Fashion-MNIST MLP of the
loss-scale runs and a small CNN (`fig3_summary.csv`: exact zeros, non-zero values that fp16 would flush, fp16 subnormals, and
the loss scales that lose the fewest without overflow). The MLP is then trained under `fp16-amp` once per
static loss scale (1 ... 2^24) and once with PyTorch's dynamic scaler, and the fraction of gradient entries
that a rounding to fp16 flushed to zero is counted where it happens (`underflow.csv`, `summary.csv`).

Tables: `fig3_histogram.csv`, `fig3_summary.csv`, `histograms.csv`, `underflow.csv`, `predicted.csv`,
`summary.csv` written by `rpsim study underflow`.

Your own run: set `RPSIM_RUN` to a run folder (several: separated by `:`) that `rpsim train --out`,
`rpsim.torch.Trainer(..., out=DIR)` or `rpsim.torch.Telemetry(model, out=DIR)` wrote (a real PyTorch run, CPU or
GPU). The same tables are then built from its `steps.csv`, `histograms.csv` and `meta.json` (`user_runs.py`): the
histograms are its FP64 shadow's where it has one, else its own (Telemetry: unscaled, as recorded); (c) shows each
run's measured underflow at the loss scale of its first recorded step and the prediction from its histograms; (d) its
per-layer underflow per step. The figure is saved as `03-underflow-run.png`."""),
    ("code", setup("underflow", "03-underflow.png", runs=True)),
    ("code", """fig3 = csv("fig3_histogram.csv")
fig3s = csv("fig3_summary.csv")
under = csv("underflow.csv")
pred = csv("predicted.csv")
summary = csv("summary.csv")
fig3s[fig3s.layer == "all"]"""),
    ("code", FP16_REGIONS + """

def binned(frame):
    \"\"\"(bins, fractions, zero fraction) of one histogram; the zero bin apart.\"\"\"
    nz = frame[~frame.log2_abs_bin.isin(["zero", "nonfinite"])]
    zero = frame[frame.log2_abs_bin == "zero"].fraction_of_entries.sum()
    return nz.log2_abs_bin.astype(int).to_numpy(), nz.fraction_of_entries.to_numpy(), zero

sources = list(dict.fromkeys(fig3.source))
colours = plt.cm.tab10(np.arange(10))
# What each histogram is: the FP64 shadow's, or (a run without one) the run's own arithmetic.
arith = dict(zip(fig3.source, fig3.arithmetic)) if "arithmetic" in fig3 else {s: "fp64" for s in sources}
NET = RUNS[0].label if RUN_MODE else "MLP"
for s in sources:
    if arith[s] != "fp64":
        print(f"{s}: no FP64 shadow: its histograms are its own gradients ({arith[s]}), not fp32 training's")
fig, axes = plt.subplots(1, 4, figsize=(24, 5))
ZERO_X = -52  # where the zero bin is drawn, left of every binade
for ax, title, pick in [
        (axes[0], "(a) whole network, by source", lambda s: fig3[(fig3.source == s) & (fig3.layer == "all")]),
]:
    for i, s in enumerate(sources):
        e, f, zero = binned(pick(s))
        ax.step(e + 0.5, f, where="mid", color=colours[i], lw=1.4, label=f"{s} (zero bin {100 * zero:.1f}%)")
        ax.bar(ZERO_X + 1.2 * i, zero, width=1.1, color=colours[i])
    fp16_regions(ax)
    ax.set_yscale("log"); ax.set_xlim(ZERO_X - 2, 20)
    ax.set_xticks([ZERO_X + 2] + list(range(-40, 21, 10))); ax.set_xticklabels(["0"] + [str(x) for x in range(-40, 21, 10)])
    ax.set_xlabel("log2 |activation gradient|  (bar at left: exactly zero)"); ax.set_ylabel("fraction of all entries")
    ax.set_title(title); ax.legend(fontsize=7, loc="upper left")

ax = axes[1]
styles = ["-", "--", "-.", ":"]
k = 0
for j, s in enumerate(sources):
    layers = [l for l in dict.fromkeys(fig3[fig3.source == s].layer) if l != "all"]
    if len(layers) > 6 and not RUN_MODE:
        continue  # a network with many layers is in (a) as a whole
    if len(layers) > 6:  # a user's model: its 6 layers that fp16 would flush most of
        f = fig3s[(fig3s.source == s) & (fig3s.layer != "all")].sort_values("fp16_zero_fraction", ascending=False, kind="stable")
        layers = list(f.layer[:6])
        print(f"(b) {s}: the 6 of {len(f)} layers with the most fp16-flushed entries: {', '.join(layers)}")
    for l in layers:
        e, f, zero = binned(fig3[(fig3.source == s) & (fig3.layer == l)])
        ax.step(e + 0.5, f, where="mid", color=colours[k % 10], ls=styles[j % 4], lw=1.2, label=f"{s} {l}")
        k += 1
fp16_regions(ax)
ax.set_yscale("log"); ax.set_xlim(-60, 20)
ax.set_xlabel("log2 |activation gradient| (" + ", ".join(sorted(set(arith.values()))) + ")")
ax.set_ylabel("fraction of the layer's entries")
ax.set_title("(b) per layer (colour: layer, line style: network)"); ax.legend(fontsize=6, ncol=2)

ax = axes[2]
static = summary[summary.static_scale > 0]
ax.plot(np.log2(static.static_scale), 100 * static.activation_grad_underflow_step0.clip(lower=1e-7), "o-", color="tab:blue",
        label="each run, measured at its first recorded step" if RUN_MODE else "MLP, measured in the fp16-amp run (step 0)")
p0 = pred[pred.tensor == "activation_grad"]
last = p0.step.max()
g = p0[p0.step == last]
ax.plot(g.log2_scale, 100 * g.underflow_fraction.clip(lower=1e-7), "s--", color="tab:green",
        label=f"{NET}, predicted from {arith.get(NET, 'fp64')} binades (step {last})")
ax.plot(g.log2_scale, 100 * g.overflow_fraction.clip(lower=1e-7), "x:", color="tab:red", label=f"{NET}, predicted overflow")
ax.set_yscale("log"); ax.set_ylim(1e-5, 100)
ax.set_xlabel("log2 static loss scale"); ax.set_ylabel("% of non-zero activation gradients (1e-5% = none)")
ax.set_title("(c) lost to fp16 at each loss scale"); ax.legend(fontsize=7)

# (d) per layer and step, the fraction of activation-gradient entries flushed to zero where it
# happens (underflow.csv): the study's scale-1 run, or the first run folder.
ax = axes[3]
act = under[under.tensor == "activation_grad"]
first = act[act.static_scale == 1].loss_scale.iloc[0] if (act.static_scale == 1).any() and not RUN_MODE \\
    else act.loss_scale.iloc[0]
shown = act[act.loss_scale == first]
layers_d = list(dict.fromkeys(shown.layer))
for i, (l, g) in enumerate(shown.groupby("layer", sort=False)):
    ax.plot(g.step, g.underflow_fraction.clip(lower=1e-7), color=plt.cm.viridis(i / max(1, len(layers_d) - 1)), lw=1, label=l)
ax.set_yscale("log"); ax.set_xlabel("step"); ax.set_ylabel("act.-grad entries flushed to 0 (floor 1e-7)")
ax.set_title(f"(d) per layer and step, " + (f"run {first}" if RUN_MODE else f"the run at loss scale {first}")); ax.legend(fontsize=5, ncol=2)
what = ("your runs: " + ", ".join(f"{s} ({arith[s]})" for s in sources)) if RUN_MODE else \
       "activation gradients of " + ", ".join(sources) + " on Fashion-MNIST (FP64 shadow)"
fig.suptitle("Micikevicius et al. 2018, Fig. 3 form" + (" — SYNTHETIC data" if meta.get("synthetic_data") else "") + ": " + what)
fig.tight_layout()"""),
    ("code", SAVE),
    ("md", "## Measured next to published"),
    ("code", COMPARE + """

def pct(x): return f"{100 * x:.3g}%"
alls = fig3s[fig3s.layer == "all"]
rows = []
for _, r in alls.iterrows():
    rows.append((f"{r.source}: activation gradients exactly zero (zero bin)", pct(r.exact_zero_fraction),
                 "67% (SSD)", "Micikevicius et al. 2018, Fig. 3 caption", "no: other network and data"))
    rows.append((f"{r.source}: non-zero but zero in fp16 (of all entries)", pct(r.fp16_zero_fraction),
                 "the mass below 2^-24 (not given as a number)", "Micikevicius et al. 2018, Sec. 3.2", "no"))
    rows.append((f"{r.source}: loss scales losing the fewest without overflow", f"2^{r.recovering_min_log2_scale:g} .. 2^{r.recovering_max_log2_scale:g}",
                 "8 was enough for SSD", "Micikevicius et al. 2018, Sec. 3.2", "no"))
s1 = summary[summary.static_scale == 1]
if len(s1) and not RUN_MODE:
    rows.append(("MLP: measured activation-grad underflow at scale 1, step 0", pct(s1.activation_grad_underflow_step0.iloc[0]),
                 "-", "(this simulator)", "-"))
over = summary[(summary.static_scale > 0) & (summary.overflow_steps > 0)]
if RUN_MODE:
    for _, r in summary.iterrows():
        rows.append((f"{r.loss_scale}: act.-grad underflow at its first step (scale {r.static_scale:g}) / mean over steps",
                     f"{pct(r.activation_grad_underflow_step0)} / {pct(r.activation_grad_underflow_mean)}", "-", "(this run)", "-"))
        rows.append((f"{r.loss_scale}: steps with an overflow / skipped", f"{r.overflow_steps} / {r.skipped_steps}", "-", "(this run)", "-"))
else:
    rows.append(("MLP: smallest static scale with overflowing steps", f"{over.static_scale.min():g}" if len(over) else "none tried",
                 "no overflow up to 32K for SSD", "Micikevicius et al. 2018", "no"))
compare(rows);"""),
    ]


def fixed_point(setup, SAVE, COMPARE):
    return [
    ("md", """# 08 · Fixed point: does 16-bit fixed point train with round to nearest, and with stochastic rounding?

Gupta et al. (*Deep Learning with Limited Numerical Precision*, ICML 2015, Sec. 4.1, Fig. 2) trained an MNIST
MLP with every tensor in 16-bit fixed point <IL, FL> (IL integer bits, sign included, FL fraction bits) and
the products accumulated exactly and rounded once. With FL = 14 and round to nearest, updates and gradients
smaller than half of 2^-14 vanish and training stalls; with stochastic rounding the same format trains
about as well as float. Here the same on Fashion-MNIST: `q16.FL` (word length 16, FL = 14, 10, 8) for the
weights, activations, activation and weight gradients and the updated weights, every rounding to nearest or
stochastic (`"rounding"` and `"update_rounding"` of the policy), beside fp32 and pure bfloat16 with
either rounding. SGD without momentum; the softmax cross-entropy in binary32. `q16.14-wide-logits` keeps
everything in q16.14 but the Linear outputs in q24.14 (the same 14 fraction bits; the ReLU output still
clamps at +-2, so in effect only the logits are wider): clamped at +-2, the logits keep the cross-entropy
gradient from vanishing and the weights grow until the network saturates, whatever the rounding.
Panel (d) is Gupta et al.'s mechanism itself: the share of weights whose nonzero gradient did not move
them (`weight_update_stalled_fraction`), where nearest rounding loses an update and stochastic
rounding keeps it on average.

Tables: `curves.csv`, `evaluations.csv`, `summary.csv` written by `rpsim study fixed-point`."""),
    ("code", setup("fixed-point", "08-fixed-point.png")),
    ("code", """curves = csv("curves.csv")
evals = csv("evaluations.csv")
summary = csv("summary.csv")
summary[["run", "steps", "final_loss_nats", "weight_update_stalled_fraction_mean", "test_accuracy_percent",
         "fp64_test_accuracy_percent"]]"""),
    ("code", """# One colour per format, solid = stochastic rounding, dashed = round to nearest.
colour = {"fp32": "k", "q16.14": "tab:blue", "q16.14-wide-logits": "tab:red", "q16.10": "tab:green",
          "q16.8": "tab:purple", "bf16-pure": "tab:orange"}
def style(run):
    base = run.rsplit("-", 1)[0] if run.endswith(("-rne", "-sr")) else run
    return dict(color=colour.get(base, "tab:gray"), ls="--" if run.endswith("-rne") else "-", lw=1.6)

# A run whose curve is identical to an earlier one's (nearest rounding that
# never reaches the range where two runs differ) says so in the legend.
first_with = {}
label = {}
for run, g in curves.groupby("run", sort=False):
    key = tuple(g.loss_emulated_nats)
    label[run] = run if key not in first_with else f"{run} (same curve as {first_with[key]})"
    first_with.setdefault(key, run)

fig, axes = plt.subplots(1, 4, figsize=(24, 5))
for run, g in curves.groupby("run", sort=False):
    w = max(1, len(g) // 30)
    axes[0].plot(g.step, g.loss_emulated_nats.rolling(w, min_periods=1).mean(), label=label[run], **style(run))
    axes[3].plot(g.step, 100 * g.weight_update_stalled_fraction.rolling(w, min_periods=1).mean(), label=label[run], **style(run))
for run, g in evals.groupby("run", sort=False):
    axes[1].plot(g.epoch, 100 - g.test_accuracy_percent, marker="o", ms=3, label=label.get(run, run), **style(run))
axes[0].set_xlabel("step"); axes[0].set_ylabel("training loss (nats, smoothed)"); axes[0].set_title("(a) training loss (Gupta Fig. 2a form)")
axes[1].set_xlabel("epoch"); axes[1].set_ylabel("test error %"); axes[1].set_yscale("log")
axes[1].set_title("(b) test error (Gupta Fig. 2b form)")
axes[0].legend(fontsize=7); axes[1].legend(fontsize=7)
ax = axes[2]
x = np.arange(len(summary))
ax.bar(x, 100 - summary.test_accuracy_percent, color=[style(r)["color"] for r in summary.run],
       hatch=None, edgecolor="k")
for i, r in enumerate(summary.run):
    if r.endswith("-rne"):
        ax.patches[i].set_hatch("//")
ax.set_xticks(x); ax.set_xticklabels(summary.run, rotation=45, ha="right")
ax.set_ylabel("final test error % (hatched: round to nearest)"); ax.set_title("(c) final test error")
axes[3].set_xlabel("step"); axes[3].set_ylabel("weights a nonzero gradient left unmoved, % (smoothed)")
axes[3].set_title("(d) updates rounded away (mean over layers)"); axes[3].legend(fontsize=7)
fig.suptitle("Gupta et al. 2015 form on Fashion-MNIST" + (" — SYNTHETIC data" if meta.get("synthetic_data") else ""))
fig.tight_layout()"""),
    ("code", SAVE),
    ("md", "## Measured next to published"),
    ("code", COMPARE + """

acc = dict(zip(summary.run, summary.test_accuracy_percent))
def err(r): return f"{100 - acc[r]:.2f}%" if r in acc else "n/a"
tr = meta["config"]["train"]
hidden = "-".join(str(h) for h in tr["model"]["hidden"])
limit = tr["data"].get("train_limit")
setting = ("partly: Fashion-MNIST (paper: MNIST), 784-" + hidden + "-10"
           + (" as the paper" if hidden == "1000-1000" else " (paper: 784-1000-1000-10)")
           + (f", {limit} training images" if limit else ", the full training set")
           + f", {tr['epochs']} epochs" + (" (--quick: fewer)" if meta.get("quick") else ""))
rows = [
    ("fp32 test error", err("fp32"), "float baseline", "Gupta et al. 2015, Fig. 2", setting),
    ("q16.14 round to nearest, test error", err("q16.14-rne"), "stalls or degrades", "Gupta et al. 2015, Fig. 2", setting),
    ("q16.14 stochastic rounding, test error", err("q16.14-sr"), "close to float", "Gupta et al. 2015, Fig. 2", setting),
    ("q16.14 with q24.14 Linear outputs (logits not clamped at +-2): nearest / stochastic",
     f"{err('q16.14-wide-logits-rne')} / {err('q16.14-wide-logits-sr')}", "nearest degrades, stochastic close to float",
     "Gupta et al. 2015, Fig. 2", setting + "; the logits' format is ours"),
    ("q16.10 nearest / stochastic", f"{err('q16.10-rne')} / {err('q16.10-sr')}", "(not quoted here; the paper's Fig. 2)", "Gupta et al. 2015, Fig. 2", setting),
    ("q16.8 nearest / stochastic", f"{err('q16.8-rne')} / {err('q16.8-sr')}", "(not quoted here; the paper's Fig. 2)", "Gupta et al. 2015, Fig. 2", setting),
    ("bf16-pure nearest / stochastic", f"{err('bf16-pure-rne')} / {err('bf16-pure-sr')}", "nearest below fp32, SR close", "Zamirai et al. 2020", "no"),
]
compare(rows);"""),
    ]
