"""Notebook 09 (your model): one user PyTorch model end to end from the run folder that
rpsim.torch.Trainer writes (rpsim train's files; experiments/python/examples/your_model_run.py
makes results/your-model), or, for the histogram and underflow panels, one that
rpsim.torch.Telemetry wrote from a real run. Called from make_notebooks.py."""

SETUP = '''import json, os, pathlib
import numpy as np
import pandas as pd
import matplotlib
import matplotlib.pyplot as plt
from matplotlib.colors import LogNorm

# The run folder: $RPSIM_RUN, else $RPSIM_RESULTS/your-model (../results beside this notebook).
# A list of folders (':'-separated, as notebooks 03, 05 and 07 take): this notebook draws the first.
RESULTS = pathlib.Path(os.environ.get("RPSIM_RESULTS", "../results")).resolve()
_runs = [p for p in os.environ.get("RPSIM_RUN", "").split(os.pathsep) if p.strip()]
RUN = pathlib.Path(_runs[0] if _runs else RESULTS / "your-model").resolve()
if len(_runs) > 1:
    print(f"RPSIM_RUN names {len(_runs)} folders: drawing the first, {RUN}")
FIGURE = RESULTS / "figures" / "09-your-model.png"
for name in ("steps.csv", "histograms.csv", "meta.json"):
    if not (RUN / name).exists():
        raise FileNotFoundError(f"{RUN}/{name} missing: run `experiments/python/examples/your_model_run.py --out {RUN}` "
                                "first, or set RPSIM_RUN to a folder rpsim.torch.Trainer or rpsim.torch.Telemetry wrote")
meta = json.loads((RUN / "meta.json").read_text())
source = meta.get("source") or meta.get("front_end") or "rpsim train"
telemetry = source == "rpsim.torch.Telemetry"
steps = pd.read_csv(RUN / "steps.csv")
hist = pd.read_csv(RUN / "histograms.csv", dtype={"log2_abs_bin": str})
evals = pd.read_csv(RUN / "evaluations.csv") if (RUN / "evaluations.csv").exists() else None
# Per-layer columns of rpsim train (both front-ends write them; Telemetry leaves the shadow's empty).
def layer_columns(suffix):
    return {c[:-len(suffix) - 1]: c for c in steps.columns if c.endswith("_" + suffix)}
distance = layer_columns("weight_rel_distance_from_fp64")
underflow = layer_columns("activation_grad_underflow_fraction")
shadow = "loss_fp64_nats" in steps and steps.loss_fp64_nats.notna().any()
print(f"{RUN}: {source}, {len(steps)} steps recorded, policy {meta.get('policy', {}).get('name', '-') if isinstance(meta.get('policy'), dict) else meta.get('policy', '-')}, "
      f"loss scale from {meta.get('loss_scale_source') or (meta.get('loss_scaler') or {}).get('policy', '-')}, "
      f"FP64 shadow: {'yes' if shadow else 'no'}")'''

HISTOGRAM = '''# The histogram drawn: the FP64 shadow's activation gradients where the run has one (Fig. 3
# histograms fp32 training's), else the run's own (Telemetry: "pytorch", unscaled); its first step.
TENSOR = "activation_grad"
arith = list(dict.fromkeys(hist.arithmetic))
REFERENCE = "fp64" if "fp64" in arith else arith[0]
HIST_STEP = int(hist.step.min())
scale_at = float(steps.loc[steps.step == HIST_STEP, "loss_scale"].iloc[0]) if (steps.step == HIST_STEP).any() else 1.0
T = -24 - np.log2(scale_at)  # the min subnormal 2^-24 in unscaled units at that step's loss scale

def binned(frame):
    """(binades, counts, zeros, total) of histogram rows; zero and non-finite bins apart."""
    nz = frame[~frame.log2_abs_bin.isin(["zero", "nonfinite"])]
    e = nz.log2_abs_bin.astype(int).to_numpy()
    return e, nz["count"].to_numpy(float), frame[frame.log2_abs_bin == "zero"]["count"].sum(), frame["count"].sum()

at = hist[(hist.step == HIST_STEP) & (hist.tensor == TENSOR)]
layers = list(dict.fromkeys(at[at.arithmetic == REFERENCE].layer))
print(f"histogram: {TENSOR} at step {HIST_STEP} ({REFERENCE}), {len(layers)} layers, loss scale then {scale_at:g}")
# Per layer: exact zeros, and the non-zero entries fp16 would flush (entirely below half its
# min subnormal: binades e <= -26) at scale 1 and at the run's loss scale, of all entries.
per_layer = []
for l in layers:
    e, c, zero, total = binned(at[(at.arithmetic == REFERENCE) & (at.layer == l)])
    per_layer.append((l, int(total), zero / total, c[e <= -26].sum() / total, c[e <= T - 2].sum() / total,
                      int(e.min()) if len(e) else None, int(e.max()) if len(e) else None))
per_layer = pd.DataFrame(per_layer, columns=["layer", "entries", "exact zero", "fp16-flushed at scale 1",
                                             f"fp16-flushed at scale 2^{np.log2(scale_at):g}", "min binade", "max binade"])
per_layer'''


def figure(fp16_regions):
    return fp16_regions + '''

fig, axes = plt.subplots(2, 3, figsize=(20, 10.5))
ZERO_X = -60  # where the zero bin is drawn, left of every binade
ax = axes[0, 0]
for i, a in enumerate(arith):
    e, c, zero, total = binned(at[at.arithmetic == a])
    if not total:
        continue
    b = pd.Series(c).groupby(e).sum()
    ax.step(b.index + 0.5, b.values / total, where="mid", lw=1.4, color=f"C{i}", label=f"{a} (zero bin {100 * zero / total:.1f}%)")
    ax.bar(ZERO_X + 1.2 * i, zero / total, width=1.1, color=f"C{i}")
fp16_regions(ax)
ax.axvline(T, color="tab:red", lw=1.2, ls="--", label=f"2^-24 / loss scale 2^{np.log2(scale_at):g}")
ax.set_yscale("log"); ax.set_xlim(ZERO_X - 2, 20)
ax.set_xticks([ZERO_X] + list(range(-50, 21, 10))); ax.set_xticklabels(["0"] + [str(x) for x in range(-50, 21, 10)])
ax.set_xlabel("log2 |activation gradient|, unscaled  (bar at left: exactly zero)"); ax.set_ylabel("fraction of all entries")
ax.set_title(f"(a) whole model, step {HIST_STEP}"); ax.legend(fontsize=7, loc="upper left")

ax = axes[0, 1]
ref = at[at.arithmetic == REFERENCE]
lo = min(-50, int(min(binned(ref)[0], default=-50))); hi = max(16, int(max(binned(ref)[0], default=16)))
grid = np.zeros((len(layers), hi - lo + 1))
labels = []
for r, l in enumerate(layers):
    e, c, zero, total = binned(ref[ref.layer == l])
    np.add.at(grid[r], e - lo, c / total)
    labels.append(f"{l} (0: {100 * zero / total:.0f}%)")
m = ax.pcolormesh(np.arange(lo, hi + 2), np.arange(len(layers) + 1), np.where(grid > 0, grid, np.nan),
                  norm=LogNorm(vmin=1e-5, vmax=1), cmap="viridis", shading="flat")
fig.colorbar(m, ax=ax, label="fraction of the layer's entries")
for x, style in [(-24, ":"), (-14, ":"), (16, ":"), (T, "--")]:
    ax.axvline(x, color="tab:red" if style == "--" else "w", ls=style, lw=1)
ax.set_yticks(np.arange(len(layers)) + 0.5); ax.set_yticklabels(labels, fontsize=6); ax.invert_yaxis()
ax.set_xlabel("log2 |activation gradient| (dotted: fp16 min subnormal 2^-24, min normal 2^-14, 2^16; dashed: 2^-24 / scale)")
ax.set_title(f"(b) per layer ({REFERENCE}, step {HIST_STEP})")

ax = axes[0, 2]
ax.step(steps.step, steps.loss_scale, where="post", color="tab:blue", label="loss scale")
sk = steps[steps.skipped == 1]
ax.plot(sk.step, sk.loss_scale, "x", color="k", ms=5, label=f"skipped step ({len(sk)})")
ax.set_yscale("log", base=2); ax.set_xlabel("step"); ax.set_ylabel("loss scale")
ax.set_title("(c) loss-scale trajectory (" + str(meta.get("loss_scale_source") or (meta.get("loss_scaler") or {}).get("policy", "")) + ")")
ax.legend(fontsize=7)

ax = axes[1, 0]
ax.plot(steps.step, steps.loss_emulated_nats, color="tab:blue", label="emulated run" if not telemetry else "the run")
if shadow:
    ax.plot(steps.step, steps.loss_fp64_nats, color="k", ls=":", label="FP64 shadow")
    ax2 = ax.twinx()
    ax2.plot(steps.step, steps.loss_emulated_nats - steps.loss_fp64_nats, color="tab:red", lw=0.8)
    ax2.set_ylabel("emulated minus FP64 (nats)", color="tab:red")
ax.set_xlabel("step"); ax.set_ylabel("training loss (nats)"); ax.set_title("(d) training loss" + (" against the FP64 shadow" if shadow else " (no FP64 shadow in this run)"))
ax.legend(fontsize=7, loc="upper right")

ax = axes[1, 1]
drawn = 0
for i, (l, col) in enumerate(distance.items()):
    y = steps[col]
    if y.notna().any():
        ax.plot(steps.step, y.clip(lower=1e-12), color=plt.cm.viridis(i / max(1, len(distance) - 1)), lw=1, label=l)
        drawn += 1
if drawn:
    ax.set_yscale("log"); ax.legend(fontsize=5, ncol=2)
else:
    ax.text(0.5, 0.5, "no FP64 shadow in this run\\n(Telemetry records a real run)", ha="center", va="center", transform=ax.transAxes)
ax.set_xlabel("step"); ax.set_ylabel("||w - w_fp64|| / ||w_fp64||"); ax.set_title("(e) per-layer weight distance from FP64")

ax = axes[1, 2]
for i, (l, col) in enumerate(underflow.items()):
    y = steps[col]
    if y.notna().any():
        ax.plot(steps.step, y.clip(lower=1e-7), color=plt.cm.viridis(i / max(1, len(underflow) - 1)), lw=1, label=l)
ax.set_yscale("log"); ax.set_xlabel("step"); ax.set_ylabel("act.-grad entries flushed to 0 (floor 1e-7)")
ax.set_title("(f) per-layer activation-gradient underflow"); ax.legend(fontsize=5, ncol=2)
fig.suptitle(f"{meta.get('name', RUN.name)}: {source}, run folder {RUN.parent.name}/{RUN.name}")
fig.tight_layout()'''


TABLE = '''def pct(x): return f"{100 * x:.3g}%"
def pow2(x): return f"2^{np.log2(x):g}" if x > 0 and float(np.log2(x)).is_integer() else f"{x:g}"
e, c, zero, total = binned(at[at.arithmetic == REFERENCE])
rows = [("steps recorded / skipped (overflow)", f"{len(steps)} / {int(steps.skipped.sum())}", "-", "(this run)"),
        ("loss scale: first / last", f"{pow2(steps.loss_scale.iloc[0])} / {pow2(steps.loss_scale.iloc[-1])}", "-", "(this run)")]
if total:
    rows += [(f"activation gradients exactly zero ({REFERENCE}, step {HIST_STEP})", pct(zero / total), "67% (SSD)",
              "Micikevicius et al. 2018, Fig. 3 caption", "no: other network and data"),
             ("non-zero but zero in fp16 at scale 1 (below 2^-25)", pct(c[e <= -26].sum() / total),
              "the mass below 2^-24 (not given as a number)", "Micikevicius et al. 2018, Sec. 3.2", "no"),
             (f"non-zero but zero in fp16 at the run's scale {pow2(scale_at)}", pct(c[e <= T - 2].sum() / total),
              "loss scaling recovers them", "Micikevicius et al. 2018, Sec. 3.2", "no")]
if shadow:
    tail = steps.tail(max(1, len(steps) // 10))
    rows.append(("training loss, last 10% of steps: emulated / FP64 shadow",
                 f"{tail.loss_emulated_nats.mean():.4f} / {tail.loss_fp64_nats.mean():.4f}",
                 "fp16 with loss scaling matches fp32", "Micikevicius et al. 2018"))
    last = {l: steps[c].iloc[-1] for l, c in distance.items() if steps[c].notna().any()}
    if last:
        worst = max(last, key=last.get)
        rows.append(("largest final weight distance from FP64 (layer)", f"{last[worst]:.3g} ({worst})", "-", "(this run)"))
if evals is not None and len(evals):
    r = evals.iloc[-1]
    rows.append((f"test loss at step {int(r.step)}: emulated / FP64 shadow",
                 f"{r.test_loss_emulated_nats:.4f} / {r.test_loss_fp64_nats:.4f}", "-", "(this run)"))
compare(rows);'''


def your_model(SAVE, COMPARE, fp16_regions):
    return [
        ("md", """# 09 · Your model: one PyTorch model under emulated fp16, end to end

`rpsim.torch` puts rpsim's precision policies, bit-exact accumulation models, the frameworks' own loss
scalers and an FP64 shadow under an ordinary `nn.Module`. This notebook draws one such run: by default the
LLaMA-style decoder of `experiments/python/examples/llama_style.py` (RMSNorm, rotary embeddings, SwiGLU; none of
which `rpsim train` can express) on Debian's fortunes, trained under `fp16-amp` with DeepSpeed's loss scaler
(`rpsim.torch.GradScaler("deepspeed")`) through `rpsim.torch.Trainer`, which steps a float64 copy of the model on
the same batches. `experiments/python/examples/your_model_run.py` writes it to `results/your-model/`.

Panels: (a, b) the activation-gradient histogram by binade in the form of Micikevicius et al. (*Mixed Precision
Training*, ICLR 2018, Fig. 3), for the whole model and per layer, with binary16's flush-to-zero, subnormal and
overflow ranges and the flush threshold at the loss scale in use; (c) the loss-scale trajectory with the skipped
steps; (d, e) how far the emulated run drifts from its FP64 shadow, in loss and per-layer weights; (f) the
fraction of activation-gradient entries flushed to zero per layer and step.

Your own run: set `RPSIM_RUN` to a folder written by `rpsim.torch.Trainer(..., out=DIR)` or by
`rpsim.torch.Telemetry(model, out=DIR)` (a real run, on CPU or GPU: no shadow, so (d) shows its loss alone and
(e) says so).

Files: `steps.csv`, `histograms.csv`, `evaluations.csv`, `meta.json` of the run folder."""),
        ("code", SETUP),
        ("code", HISTOGRAM),
        ("code", figure(fp16_regions)),
        ("code", SAVE),
        ("md", "## Measured next to published"),
        ("code", COMPARE + "\n\n" + TABLE),
    ]
