#!/usr/bin/python3
"""Writes the numbered notebooks (nbformat 4) from the cell sources below.

The notebooks are generated so that their shared setup stays identical and
their JSON stays reviewable; edit this file, then run it:
    /usr/bin/python3 notebooks/make_notebooks.py
"""
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent


def setup(study, figure):
    return f'''import json, os, pathlib
import numpy as np
import pandas as pd
import matplotlib
import matplotlib.pyplot as plt

# Results folder: $RPSIM_RESULTS, else ../results beside this notebook.
RESULTS = pathlib.Path(os.environ.get("RPSIM_RESULTS", "../results")).resolve()
STUDY = RESULTS / "{study}"
FIGURE = RESULTS / "figures" / "{figure}"
if not (STUDY / "meta.json").exists():
    raise FileNotFoundError(f"{{STUDY}}/meta.json missing: run `rpsim study {study}` first")
meta = json.loads((STUDY / "meta.json").read_text())
print(f"study {{meta['study']}} ({{'quick' if meta['quick'] else 'full'}}), commit {{meta['git_commit'][:12]}}, "
      f"{{meta['wall_time_s']:.1f}} s")
def csv(name):
    return pd.read_csv(STUDY / name)'''


SAVE = '''FIGURE.parent.mkdir(parents=True, exist_ok=True)
fig.savefig(FIGURE, dpi=120, bbox_inches="tight")
print("saved", FIGURE)'''

COMPARE = '''def compare(rows):
    """Prints measured next to published, one line each."""
    table = pd.DataFrame(rows, columns=["quantity", "measured", "published", "source"])
    with pd.option_context("display.max_colwidth", 80, "display.width", 200):
        print(table.to_string(index=False))
    return table'''


NOTEBOOKS = {}

NOTEBOOKS["01-summation"] = [
    ("md", """# 01 · Summation: how does rounding error grow with the number of terms?

Recursive summation in a p-bit format under round-to-nearest **stagnates**: once the running sum reaches
2^p, adding 1 is a tie that rounds back to the even sum, so fp16 (p = 11) stops at 2048 and bfloat16
(p = 8) at 256. Stochastic rounding (SR) is unbiased, so the SR sum keeps growing and its error behaves like
a random walk of standard deviation at most sqrt(sum u_i^2/4) (Connolly, Higham & Mary, *SIAM J. Sci. Comput.*
43(1), 2021).

For random data, the error of sums and dot products is compared with the deterministic bound
gamma_n = nu/(1-nu) and the probabilistic bound ~ sqrt(n)·u of Higham & Mary (*SIAM J. Sci. Comput.* 41(5),
2019), for recursive, FMA, pairwise, blocked, compensated (Kahan) and tensor-core accumulation.

Tables: `stagnation.csv`, `trajectory.csv`, `sr_sums.csv`, `error_vs_n.csv` written by `rpsim study summation`."""),
    ("code", setup("summation", "01-summation.png")),
    ("code", '''stagnation = csv("stagnation.csv")
trajectory = csv("trajectory.csv")
sr = csv("sr_sums.csv")
err = csv("error_vs_n.csv")
stagnation'''),
    ("code", '''fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))

ax = axes[0]
ones = trajectory[trajectory.addend == 1]
for (fmt, rnd), g in ones.groupby(["format", "rounding"]):
    ax.plot(g.terms, g.computed_sum, label=f"{fmt} {rnd.upper()}", lw=1.5, ls="-" if rnd == "sr" else "--")
top = ones.terms.max()
ax.plot([0, top], [0, top], color="k", lw=0.8, label="exact")
for v in stagnation[stagnation.format.isin(["binary16", "bfloat16"])].stagnation_value.dropna():
    ax.axhline(v, color="grey", lw=0.5, ls=":")
ax.set_xscale("log"); ax.set_yscale("log")
ax.set_xlabel("number of ones added"); ax.set_ylabel("computed sum")
ax.set_title("(a) sum of ones: RNE stagnates, SR does not")
ax.legend(fontsize=8)

def error_panel(ax, data, title):
    med = data.groupby(["model", "n"]).relative_error.median().reset_index()
    for model, g in med.groupby("model", sort=False):
        y = g.relative_error.clip(lower=1e-12)
        ax.plot(g.n, y, marker="o", ms=3, label=model)
    # Bounds for the RNE accumulators in this panel.
    for fmt_name, u in data[data.rounding == "rne"].groupby("accumulator_format").unit_roundoff.first().items():
        n = np.array(sorted(data.n.unique()), dtype=float)
        ax.plot(n, np.minimum(n * u / np.maximum(1 - n * u, 1e-300), 1e3), "k--", lw=0.8)
        ax.plot(n, np.sqrt(n) * u, "k:", lw=0.8)
        ax.annotate(f"gamma_n, u={u:.0e}", (n[-1], min(n[-1] * u, 1)), fontsize=7, ha="right", va="bottom")
        ax.annotate(f"sqrt(n)u", (n[-1], np.sqrt(n[-1]) * u), fontsize=7, ha="right", va="top")
    ax.set_xscale("log"); ax.set_yscale("log"); ax.set_ylim(1e-12, 10)
    ax.set_xlabel("n"); ax.set_ylabel("relative error  |s - ŝ| / Σ|x_i y_i|  (median)")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)

sums = err[(err.operation == "sum") & err.accumulator_format.isin(["binary16"])]
error_panel(axes[1], sums, "(b) sum of uniform data, fp16 accumulation")
dots = err[(err.operation == "dot") & err.accumulator_format.isin(["binary32"])]
error_panel(axes[2], dots, "(c) fp16 dot products, fp32 / tensor-core accumulation")
fig.tight_layout()'''),
    ("code", SAVE),
    ("code", '''fig2, axes2 = plt.subplots(1, 2, figsize=(12, 4.5))
error_panel(axes2[0], err[(err.operation == "dot") & (err.accumulator_format == "binary16")],
            "fp16 dot products, fp16 accumulation")
error_panel(axes2[1], err[(err.operation == "sum") & (err.accumulator_format == "bfloat16")],
            "sum of uniform data, bf16 accumulation")
fig2.tight_layout()'''),
    ("md", "## Measured next to published"),
    ("code", COMPARE + '''

def stag(fmt):
    row = stagnation[stagnation.format == fmt]
    return float(row.stagnation_value.iloc[0]) if len(row) else float("nan")

rows = [
    ("fp16 RNE sum of ones stops at", stag("binary16"), 2048, "2^11; Connolly, Higham & Mary 2021, Sec. 1"),
    ("bf16 RNE sum of ones stops at", stag("bfloat16"), 256, "2^8; same argument"),
]
for (fmt, addend, terms), g in sr.groupby(["format", "addend", "terms"]):
    rows.append((f"{fmt} SR sum of {terms} x {addend}: trials within 6 sigma + bias",
                 f"{int(g.within_bound.sum())}/{len(g)} (worst |err| = {(g.error.abs() / g.sigma).max():.2f} sigma)",
                 "all (unbiased, std <= sqrt(sum u_i^2/4))", "Connolly, Higham & Mary 2021, Thm 4.x"))
big = err[err.n == err.n.max()]
for model in ["sequential:binary16:rne", "sequential:binary16:sr", "pairwise:binary16:rne"]:
    g = big[(big.operation == "sum") & big.model.str.startswith(model)]
    if len(g):
        ratio = (g.relative_error / g.bound_sqrt_n_u).median()
        rows.append((f"{model} sum, n={int(g.n.iloc[0])}: error / (sqrt(n) u)", f"{ratio:.3g}",
                     "O(1) for RNE on random data (lambda ~ 1); SR: O(1) always",
                     "Higham & Mary 2019, Sec. 4; Connolly et al. 2021"))
compare(rows);'''),
]

NOTEBOOKS["02-tensor-cores"] = [
    ("md", """# 02 · Tensor cores: what do black-box probes find in each model, and how does GEMM error grow with K?

Fasi, Higham, Mikaitis & Pranesh (*PeerJ Comput. Sci.* 7:e330, 2021) found the numerical features of NVIDIA
tensor cores by feeding them crafted inputs: how many products are fused per step, how many bits below the
largest exponent survive alignment, how the final normalisation rounds, and whether subnormals are kept.
Khattak & Mikaitis (*ACM TACO*, 2025) extended this to Ada, Hopper and Blackwell, including the 13-bit
FP8 accumulator. Here the same style of probes is run against every preset of rpsim's tensor-core model:
the probes see only `d = c + sum a_i b_i`, never the model's parameters, so agreement with the published
table is a test of both the model and the probes.

Tables: `detection.csv`, `gemm_error.csv` written by `rpsim study tensor-cores`."""),
    ("code", setup("tensor-cores", "02-tensor-cores.png")),
    ("code", """det = csv("detection.csv")
gemm = csv("gemm_error.csv")
fp32 = det[det.output_format == "binary32"].copy()
fp32["extra"] = fp32.extra_alignment_bits.astype(str) + np.where(fp32.extra_bits_capped, "+", "")
table = fp32.pivot_table(index=["preset", "instruction"], columns="input_format",
                         values=["terms_per_step", "extra", "accumulator_fraction_bits"], aggfunc="first")
table"""),
    ("code", """fig, axes = plt.subplots(1, 2, figsize=(16, 5.5), gridspec_kw={"width_ratios": [1.1, 1]})
ax = axes[0]
ax.axis("off")
shown = fp32[fp32.instruction == "default"][["preset", "input_format", "terms_per_step", "extra",
                                             "accumulator_fraction_bits", "final_rounding",
                                             "subnormal_inputs", "subnormal_outputs"]]
shown = shown.rename(columns={"input_format": "input", "terms_per_step": "terms/step", "extra": "extra bits",
                              "accumulator_fraction_bits": "acc. bits", "final_rounding": "rounding",
                              "subnormal_inputs": "sub. in", "subnormal_outputs": "sub. out"})
tbl = ax.table(cellText=shown.values, colLabels=shown.columns, bbox=[0, 0, 1, 0.96], cellLoc="center")
tbl.auto_set_font_size(False); tbl.set_fontsize(7)
ax.set_title("(a) features detected by probes, fp32 output (mma.sync)", y=0.98)

ax = axes[1]
g16 = gemm[(gemm.input_format == "binary16") | (gemm.preset == "none")]
for model, g in g16.groupby("model", sort=False):
    baseline = g.preset.iloc[0] == "none"
    ax.plot(g.k, g.max_relative_error.clip(lower=1e-12), marker="o", ms=3, ls="--" if baseline else "-",
            label=f"{model} (fp32 inputs)" if baseline else g.preset.iloc[0])
k = np.array(sorted(gemm.k.unique()), dtype=float)
u = 2.0 ** -24
ax.plot(k, k * u, "k--", lw=0.8, label="gamma_K, u = 2^-24")
ax.plot(k, np.sqrt(k) * u, "k:", lw=0.8, label="sqrt(K) u")
ax.set_xscale("log", base=2); ax.set_yscale("log")
ax.set_xlabel("K (inner dimension)"); ax.set_ylabel("max relative error over D = AB (fp16 inputs, uniform [0,1))")
ax.set_title("(b) GEMM error vs K, fp16 inputs, fp32 output")
ax.legend(fontsize=7, ncol=2)
fig.tight_layout()"""),
    ("code", SAVE),
    ("md", """## Measured next to published

Published values as cited for each preset in `sim/accumulation/src/tensor_core_presets.cpp`: FHMP21 = Fasi et al. 2021,
KM25 = Khattak & Mikaitis 2025 (fp32 output, default instruction)."""),
    ("code", COMPARE + """

PUBLISHED = {  # (preset, input): (terms per step, extra bits, accumulator bits, source)
    ("v100", "binary16"): (4, 0, 23, "FHMP21 Sec. 5"),
    ("t4", "binary16"): (4, 1, 23, "FHMP21 Sec. 5"),
    ("a100", "binary16"): (8, 1, 23, "FHMP21 Sec. 6"),
    ("a100", "bfloat16"): (8, 1, 23, "FHMP21 Sec. 6"),
    ("a100", "tf32"): (4, 1, 23, "FHMP21 Sec. 6"),
    ("ada", "e4m3"): (16, None, 13, "KM25 (13-bit FP8 accumulator)"),
    ("h100", "binary16"): (16, 2, 23, "KM25"),
    ("h100", "e4m3"): (32, None, 13, "KM25 (wgmma)"),
    ("b200", "e4m3"): (32, 2, 23, "KM25 (no 13-bit accumulator)"),
}
rows = []
for (preset, inp), (terms, extra, width, src) in PUBLISHED.items():
    r = fp32[(fp32.preset == preset) & (fp32.input_format == inp) & (fp32.instruction == "default")]
    if not len(r):
        continue
    r = r.iloc[0]
    rows.append((f"{preset} {inp}: terms/step, extra bits, acc. bits",
                 f"{r.terms_per_step}, {r.extra}, {r.accumulator_fraction_bits}",
                 f"{terms}, {'-' if extra is None else extra}, {width}", src))
rows.append(("final rounding, fp32 output (all presets)", ", ".join(sorted(fp32.final_rounding.unique())),
             "rtz (truncation)", "FHMP21; KM25"))
compare(rows);"""),
]

NOTEBOOKS["03-underflow"] = [
    ("md", """# 03 · Underflow: how many fp16 gradients vanish, and how many does each loss scale recover?

Micikevicius et al. (*Mixed Precision Training*, ICLR 2018, Fig. 3) histogrammed the activation gradients of
the Multibox SSD detector: 67% of the values were zero in fp16 (below 2^-24) and scaling the loss by 8 to
32K moved them into range without overflow. Here a Fashion-MNIST MLP is trained under `fp16-amp` beside
an FP64 shadow, once per static loss scale (1 ... 2^24) and once with PyTorch's dynamic scaler. Two
measures: the fraction of gradient entries that a rounding to fp16 flushed to zero in the emulated run,
counted where it happens (non-zero before the rounding, zero after; `underflow.csv`), and the paper's own
method: the fraction of FP64 magnitudes that a scale S would flush below half the smallest fp16 subnormal or
push beyond 65504 (`predicted.csv`).

Tables: `histograms.csv`, `underflow.csv`, `predicted.csv`, `summary.csv` written by `rpsim study underflow`."""),
    ("code", setup("underflow", "03-underflow.png")),
    ("code", """hist = csv("histograms.csv")
under = csv("underflow.csv")
pred = csv("predicted.csv")
summary = csv("summary.csv")
summary"""),
    ("code", """fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
ax = axes[0]
h = hist[(hist.loss_scale == "1") & (hist.arithmetic == "fp64") & ~hist.log2_abs_bin.isin(["zero", "nonfinite"])]
h = h.assign(bin=h.log2_abs_bin.astype(int))
for (step, tensor), g in h.groupby(["step", "tensor"]):
    g = g.groupby("bin")["count"].sum()
    ax.step(g.index, g.values / g.values.sum(), where="mid", label=f"{tensor}, step {step}")
ax.axvline(-24, color="r", ls="--", lw=0.8); ax.text(-24, ax.get_ylim()[1] * 0.9, " fp16 min subnormal", color="r", fontsize=7)
ax.axvline(-14, color="orange", ls="--", lw=0.8); ax.text(-14, ax.get_ylim()[1] * 0.8, " fp16 min normal", color="orange", fontsize=7)
ax.axvline(16, color="k", ls="--", lw=0.8); ax.text(16, ax.get_ylim()[1] * 0.7, " 65504", fontsize=7)
ax.set_xlabel("log2 |g|  (FP64 shadow)"); ax.set_ylabel("fraction of non-zero values")
ax.set_title("(a) gradient magnitudes vs the fp16 range"); ax.legend(fontsize=7)

ax = axes[1]
for (step, tensor), g in pred.groupby(["step", "tensor"]):
    ax.plot(g.log2_scale, g.underflow_fraction * 100, label=f"underflow {tensor} step {step}")
    ax.plot(g.log2_scale, g.overflow_fraction * 100, ls=":", label=f"overflow {tensor} step {step}")
ax.set_xlabel("log2 loss scale"); ax.set_ylabel("% of non-zero FP64 gradients")
ax.set_title("(b) predicted from FP64 magnitudes (Micikevicius et al. Fig. 3 method)"); ax.legend(fontsize=6)

ax = axes[2]
static = summary[summary.static_scale > 0]
ax.plot(np.log2(static.static_scale), static.activation_grad_underflow_step0 * 100, "o-", label="activation grads, underflow")
ax.plot(np.log2(static.static_scale), static.weight_grad_underflow_step0 * 100, "s-", label="weight grads, underflow")
ax.plot(np.log2(static.static_scale), static.weight_grad_nonfinite_mean * 100, "x--", label="weight grads, overflow (mean)")
ax.set_xlabel("log2 static loss scale"); ax.set_ylabel("% of gradients (flushed by rounding to fp16)")
ax.set_title("(c) measured in the fp16-amp run, step 0"); ax.legend(fontsize=7)
fig.tight_layout()"""),
    ("code", SAVE),
    ("md", "## Measured next to published"),
    ("code", COMPARE + """

p0 = pred[(pred.tensor == "activation_grad")]
first, last = p0.step.min(), p0.step.max()
def pct(x): return f"{100 * x:.3g}%"
rows = [
    ("activation grads flushed to zero at scale 1 (FP64 magnitudes, first/last histogram step)",
     f"{pct(p0[(p0.step == first) & (p0.log2_scale == 0)].underflow_fraction.iloc[0])} / "
     f"{pct(p0[(p0.step == last) & (p0.log2_scale == 0)].underflow_fraction.iloc[0])}",
     "66.8% (SSD)", "Micikevicius et al. 2018, Fig. 3"),
]
for scale in [8, 32768]:
    r = p0[(p0.step == last) & (p0.scale == scale)]
    if len(r):
        rows.append((f"scale {scale}: underflow / overflow (predicted, last step)",
                     f"{pct(r.underflow_fraction.iloc[0])} / {pct(r.overflow_fraction.iloc[0])}",
                     "most recovered / no overflow", "Micikevicius et al. 2018, Sec. 3.2"))
s1 = summary[summary.static_scale == 1]
if len(s1):
    rows.append(("measured activation-grad underflow at scale 1, step 0 (flushed by rounding to fp16)",
                 pct(s1.activation_grad_underflow_step0.iloc[0]), "66.8% (SSD)", "Micikevicius et al. 2018"))
over = summary[(summary.static_scale > 0) & (summary.overflow_steps > 0)]
rows.append(("smallest static scale with overflowing steps",
             f"{over.static_scale.min():g}" if len(over) else "none tried", "> 32768 for SSD", "Micikevicius et al. 2018"))
compare(rows);"""),
]

NOTEBOOKS["04-loss-scale"] = [
    ("md", """# 04 · Loss scaling: how do the frameworks' scalers react to overflow?

Dynamic loss scaling (Micikevicius et al. 2018, Sec. 3.2; Kuchaiev et al. 2018) raises the scale after a run
of clean steps and lowers it, skipping the update, when a gradient overflows. PyTorch, DeepSpeed, Megatron,
Apex, Keras and TF2 differ in their defaults, hysteresis and counters. The same `fp16-amp` run is repeated
under each scaler, with overflows provoked by each scaler's own initial scale and by infs injected into the
gradients at fixed steps: scale against step, skipped steps and final accuracy.

Tables: `scale_trace.csv`, `summary.csv` written by `rpsim study loss-scale`."""),
    ("code", setup("loss-scale", "04-loss-scale.png")),
    ("code", """trace = csv("scale_trace.csv")
summary = csv("summary.csv")
summary"""),
    ("code", """fig, axes = plt.subplots(1, 2, figsize=(15, 4.8), gridspec_kw={"width_ratios": [2, 1]})
ax = axes[0]
injected = meta["config"]["train"].get("inject_overflow_steps", [])
for name, g in trace.groupby("scaler", sort=False):
    ax.step(g.step, g.loss_scale, where="post", label=name)
    sk = g[g.skipped == 1]
    ax.plot(sk.step, sk.loss_scale, "x", color="k", ms=4)
for s in meta["config"]["train"].get("inject_overflow_steps", []):
    ax.axvline(s, color="grey", lw=0.5, ls=":")
ax.set_yscale("log", base=2); ax.set_xlabel("step"); ax.set_ylabel("loss scale (x: skipped step)")
ax.set_title("(a) loss scale vs step (dotted: injected overflows)"); ax.legend(fontsize=7, ncol=2)
ax = axes[1]
x = np.arange(len(summary))
ax.bar(x - 0.2, summary.skipped_steps, 0.4, label="skipped steps")
ax2 = ax.twinx()
ax2.bar(x + 0.2, summary.test_accuracy_percent, 0.4, color="tab:green", label="test accuracy %")
ax.set_xticks(x); ax.set_xticklabels(summary.scaler, rotation=45, ha="right")
ax.set_ylabel("skipped steps"); ax2.set_ylabel("test accuracy %", color="tab:green")
ax.set_title("(b) skipped steps and final accuracy")
fig.tight_layout()"""),
    ("code", SAVE),
    ("md", "## Measured next to published"),
    ("code", COMPARE + """

rows = []
for _, r in summary.iterrows():
    rows.append((f"{r.scaler}: skipped steps / final scale / test accuracy",
                 f"{r.skipped_steps} / {r.final_loss_scale:g} / {r.test_accuracy_percent:.2f}%",
                 "skips only on overflow; accuracy matches fp32", "Micikevicius et al. 2018, Sec. 3.2"))
compare(rows);"""),
]

NOTEBOOKS["05-accuracy"] = [
    ("md", """# 05 · Accuracy: how close to fp32 and to an FP64 shadow does each precision policy train?

Gupta et al. (*Deep Learning with Limited Numerical Precision*, ICML 2015) showed that 16-bit training
matches fp32 with stochastic rounding but stalls with round-to-nearest; Zamirai et al. (*Revisiting BFloat16
Training*, arXiv:2010.06192, 2020) showed that pure bf16 training loses accuracy because nearest-rounded
weight updates vanish, and that stochastic rounding or Kahan-compensated updates recover fp32 accuracy.
The same MLP, initial weights and data order are trained under fp32, fp16-amp, bf16-amp, bf16-pure with
nearest and stochastic update rounding, bf16 with Kahan updates and FP8 with delayed scaling; every run
has an FP64 shadow, so each curve also shows how far the weights drift from exact arithmetic.

Tables: `curves.csv`, `evaluations.csv`, `summary.csv` written by `rpsim study accuracy`."""),
    ("code", setup("accuracy", "05-accuracy.png")),
    ("code", """curves = csv("curves.csv")
evals = csv("evaluations.csv")
summary = csv("summary.csv")
summary"""),
    ("code", """fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
for run, g in curves.groupby("run", sort=False):
    w = max(1, len(g) // 40)
    axes[0].plot(g.step, g.loss_emulated_nats.rolling(w, min_periods=1).mean(), label=run)
    axes[1].plot(g.step, g.weight_rel_distance_from_fp64.clip(lower=1e-12), label=run)
axes[0].set_xlabel("step"); axes[0].set_ylabel("training loss (nats, smoothed)"); axes[0].set_title("(a) training loss")
axes[1].set_yscale("log"); axes[1].set_xlabel("step"); axes[1].set_ylabel("||w - w_fp64|| / ||w_fp64|| (mean over layers)")
axes[1].set_title("(b) distance from the FP64 shadow")
axes[0].legend(fontsize=7); axes[1].legend(fontsize=7)
ax = axes[2]
x = np.arange(len(summary))
ax.bar(x, summary.test_accuracy_percent, color="tab:blue", label="policy")
ax.plot(x, summary.fp64_test_accuracy_percent, "k_", ms=20, mew=2, label="its FP64 shadow")
ax.set_xticks(x); ax.set_xticklabels(summary.run, rotation=45, ha="right")
lo = min(summary.test_accuracy_percent.min(), summary.fp64_test_accuracy_percent.min())
ax.set_ylim(max(0, lo - 5), 100); ax.set_ylabel("test accuracy %"); ax.set_title("(c) final test accuracy"); ax.legend(fontsize=7)
fig.tight_layout()"""),
    ("code", SAVE),
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


def cell(kind, source):
    lines = source.split("\n")
    src = [l + "\n" for l in lines[:-1]] + [lines[-1]]
    if kind == "md":
        return {"cell_type": "markdown", "metadata": {}, "source": src}
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": src}


def main():
    for name, cells in NOTEBOOKS.items():
        nb = {
            "cells": [cell(k, s) for k, s in cells],
            "metadata": {
                "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                "language_info": {"name": "python"},
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        for i, c in enumerate(nb["cells"]):
            c["id"] = f"{name[:2]}-{i:02d}"
        (HERE / f"{name}.ipynb").write_text(json.dumps(nb, indent=1) + "\n")


if __name__ == "__main__":
    main()
