"""Notebook 10 (block-scaled): the GPT under the MX and NVFP4 policies beside
its FP64 shadow; cell sources, called from make_notebooks.py with its shared
setup cells."""


def block_scaled(setup, SAVE, COMPARE):
    return [
    ("md", """# 10 · Block-scaled training: MXFP8, MXFP6, MXFP4 and NVFP4 against the FP64 shadow

The OCP Microscaling formats (MX v1.0; Rouhani et al., *Microscaling Data Formats for Deep Learning*,
arXiv:2310.10537, 2023) give every block of 32 elements one E8M0 (power-of-two) scale. NVIDIA's NVFP4
(*Pretraining Large Language Models with NVFP4*, arXiv:2509.25149, 2025) uses blocks of 16 with an E4M3
scale under a per-tensor FP32 scale, and trains with a recipe: 16x16 2D blocks for weights, a 16x16 random
Hadamard transform on the weight-gradient GEMM's inputs, stochastic rounding of gradients, and the last
layers in BF16. rpsim trains the character-level GPT of notebook 07 under bf16 autocast, per-tensor FP8
(delayed scaling), `mxfp8`, `mxfp6`, `nvfp4` and `mxfp4`, each beside an FP64 shadow trained in lockstep
from the same weights and batches. The GEMMs accumulate in binary32 in every run, so the differences come
from the quantisation of the GEMM inputs.

Tables: `curves.csv`, `evaluations.csv`, `summary.csv` written by `rpsim study block-scaled`."""),
    ("code", setup("block-scaled", "10-block-scaled.png")),
    ("code", """curves = csv("curves.csv")
evals = csv("evaluations.csv")
summary = csv("summary.csv")
synthetic = meta.get("synthetic_data", False)
print(meta.get("data_set", ""))
summary[["run", "val_loss_emulated_nats", "val_loss_fp64_nats", "val_loss_gap_nats"]]"""),
    ("code", """runs = list(summary.run)
colours = dict(zip(runs, plt.cm.tab10.colors))
fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
ax = axes[0]
for run, g in evals.groupby("run", sort=False):
    ax.plot(g.step, g.val_loss_emulated_nats, "-o", ms=3, color=colours[run], label=run)
    ax.plot(g.step, g.val_loss_fp64_nats, ":", color=colours[run], lw=1)
ax.set_xlabel("step"); ax.set_ylabel("validation loss (nats/char)")
ax.set_title("(a) validation loss; dotted: each run's FP64 shadow")
ax.legend(fontsize=7)
ax = axes[1]
for run, g in evals.groupby("run", sort=False):
    ax.plot(g.step, g.val_loss_emulated_nats - g.val_loss_fp64_nats, "-o", ms=3, color=colours[run], label=run)
ax.axhline(0, color="grey", lw=0.5)
ax.set_xlabel("step"); ax.set_ylabel("run minus its FP64 shadow (nats/char)")
ax.set_title("(b) distance from the shadow, validation loss")
ax.legend(fontsize=7)
ax = axes[2]
x = np.arange(len(summary))
ax.bar(x, summary.val_loss_gap_nats, color=[colours[r] for r in summary.run])
ax.set_xticks(x); ax.set_xticklabels(summary.run, rotation=30, ha="right")
ax.axhline(0, color="grey", lw=0.5)
ax.set_ylabel("final validation loss minus shadow (nats/char)")
ax.set_title("(c) at the end")
title = "character-level GPT on " + ("SYNTHETIC text" if synthetic else "Debian's fortunes")
fig.suptitle(title)
fig.tight_layout()"""),
    ("code", SAVE),
    ("md", "## Measured next to published"),
    ("code", COMPARE + """

gap = dict(zip(summary.run, summary.val_loss_gap_nats))
val = dict(zip(summary.run, summary.val_loss_emulated_nats))
def rel(a, b):
    return f"{100 * (val[a] - val[b]) / val[b]:+.2f}%" if a in val and b in val else "n/a"
rows = [
    ("nvfp4 minus fp8, validation loss (relative)", rel("nvfp4", "fp8"), "within 1.5% (12B model, 10T tokens)", "NVIDIA 2025 (arXiv:2509.25149)"),
    ("mxfp4 minus nvfp4, validation loss (relative)", rel("mxfp4", "nvfp4"), "MXFP4 behind NVFP4 (8B model)", "NVIDIA 2025 (arXiv:2509.25149)"),
    ("mxfp6 minus bf16-amp, validation loss (relative)", rel("mxfp6", "bf16-amp"), "MXFP6 trains GPTs close to FP32", "Rouhani et al. 2023"),
]
for run in summary.run:
    rows.append((f"{run}: final validation loss minus its FP64 shadow", f"{gap[run]:+.4f} nats", "-", "(this simulator)"))
compare(rows);"""),
]
