"""Notebook 11 (llama-block-scaled): the LLaMA-style decoder through rpsim.torch under bf16, per-tensor
FP8, MXFP8, NVFP4 and MXFP4 beside its FP64 shadow; cell sources, called from make_notebooks.py with
its shared setup cells. The tables come from experiments/python/examples/llama_study.py."""


def llama_block_scaled(setup, SAVE, COMPARE):
    return [
    ("md", """# 11 · The LLaMA-style decoder under bf16, FP8, MXFP8, NVFP4 and MXFP4 against the FP64 shadow

Notebook 10 trains the GPT that `rpsim train` builds from its layer list. A LLaMA-style decoder (Touvron et
al. 2023: RMSNorm, rotary position embeddings, a SwiGLU feed-forward, no biases) is not in that list, so it
runs through `rpsim.torch.Trainer` on the model of `experiments/python/examples/llama_style.py`: every
linear layer and matmul on rpsim's GEMMs under the policy, the other ops in binary32 rounded to their
autocast class's format, beside a float64 copy trained in lockstep from the same weights on the same
batches (the FP64 shadow). Policies: bf16 autocast, per-tensor FP8 with delayed scaling (Transformer
Engine), OCP MXFP8 (MX v1.0: blocks of 32, E8M0 scales; Rouhani et al., arXiv:2310.10537), NVIDIA's NVFP4
recipe (arXiv:2509.25149: E2M1 in 1x16 blocks with E4M3 scales under an FP32 tensor scale, 16x16 weight
blocks, a random Hadamard transform on the weight-gradient GEMM's inputs, stochastically rounded
gradients, the last linear in bf16) and OCP MXFP4. The GEMMs accumulate in binary32 in every run.

Tables: `curves.csv`, `evaluations.csv`, `summary.csv` written by
`experiments/python/examples/llama_study.py` (`--quick` for the CI-sized run)."""),
    ("code", setup("llama-block-scaled", "11-llama-block-scaled.png").replace(
        "run `rpsim study llama-block-scaled` first",
        "run `PYTHONPATH=build/python /usr/bin/python3 experiments/python/examples/llama_study.py` first")),
    ("code", """curves = csv("curves.csv")
evals = csv("evaluations.csv")
summary = csv("summary.csv")
synthetic = meta.get("synthetic_data", False)
print(meta.get("data_set", ""))
summary[["run", "final_loss_emulated_nats", "final_loss_fp64_nats", "final_loss_drift_nats",
         "max_abs_loss_drift_nats", "final_weight_rel_distance_from_fp64_max",
         "final_weight_rel_distance_from_fp64_max_layer", "test_loss_gap_nats"]]"""),
    ("code", """runs = list(summary.run)
colours = dict(zip(runs, plt.cm.tab10.colors))
fig, axes = plt.subplots(2, 2, figsize=(14, 9))
ax = axes[0, 0]
# Every run's shadow starts from the same weights and sees the same batches: one FP64 curve.
shadow = curves[curves.run == runs[0]]
ax.plot(shadow.step, shadow.loss_fp64_nats, "k--", lw=1.2, zorder=5, label="FP64 shadow")
for run, g in curves.groupby("run", sort=False):
    ax.plot(g.step, g.loss_emulated_nats, "-", lw=1, color=colours[run], label=run)
ax.set_xlabel("step"); ax.set_ylabel("training loss (nats/char)")
ax.set_title("(a) training loss vs step"); ax.legend(fontsize=8)
ax = axes[0, 1]
for run, g in curves.groupby("run", sort=False):
    ax.plot(g.step, g.loss_drift_nats, "-o", ms=2, lw=1, color=colours[run], label=run)
ax.axhline(0, color="grey", lw=0.5)
ax.set_xlabel("step"); ax.set_ylabel("run minus FP64 shadow (nats/char)")
ax.set_title("(b) drift of the training loss from the shadow"); ax.legend(fontsize=8)
ax = axes[1, 0]
for run, g in curves.groupby("run", sort=False):
    ax.plot(g.step, g.weight_rel_distance_from_fp64_max, "-", color=colours[run], label=run)
ax.set_yscale("log")
ax.set_xlabel("step"); ax.set_ylabel("largest per-layer ||w - w64|| / ||w64||")
ax.set_title("(c) weight drift from the shadow"); ax.legend(fontsize=8)
ax = axes[1, 1]
for run, g in evals.groupby("run", sort=False):
    ax.plot(g.step, g.test_loss_gap_nats, "-o", ms=3, color=colours[run], label=run)
ax.axhline(0, color="grey", lw=0.5)
ax.set_xlabel("step"); ax.set_ylabel("held-out loss minus shadow's (nats/char)")
ax.set_title("(d) held-out loss gap"); ax.legend(fontsize=8)
title = "LLaMA-style decoder (rpsim.torch) on " + ("SYNTHETIC text" if synthetic else "Debian's fortunes")
fig.suptitle(title + (" -- quick run" if meta["quick"] else ""))
fig.tight_layout()"""),
    ("code", SAVE),
    ("md", "## Measured next to published"),
    ("code", COMPARE + """

test = dict(zip(summary.run, summary.test_loss_emulated_nats))
setting = f"no: {meta['parameters'] / 1e3:.0f}k parameters, {meta['config']['train']['steps']} steps"
def rel(a, b):
    return f"{100 * (test[a] - test[b]) / test[b]:+.2f}%" if a in test and b in test else "n/a"
rows = [
    ("nvfp4 minus fp8, held-out loss (relative)", rel("nvfp4", "fp8"), "within 1.5% (12B model, 10T tokens)",
     "NVIDIA 2025 (arXiv:2509.25149)", setting),
    ("mxfp4 minus nvfp4, held-out loss (relative)", rel("mxfp4", "nvfp4"), "MXFP4 behind NVFP4 (8B model)",
     "NVIDIA 2025 (arXiv:2509.25149)", setting),
    ("mxfp8 minus bf16-amp, held-out loss (relative)", rel("mxfp8", "bf16-amp"), "MXFP8 matches BF16 / FP32",
     "Rouhani et al. 2023", setting),
]
for r in summary.itertuples():
    rows.append((f"{r.run}: final training loss minus its FP64 shadow (largest absolute drift over the run)",
                 f"{r.final_loss_drift_nats:+.4f} ({r.max_abs_loss_drift_nats:.4f}) nats", "-", "(this simulator)"))
compare(rows);"""),
]
