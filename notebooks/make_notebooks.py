#!/usr/bin/python3
"""Writes the numbered notebooks (nbformat 4) from the cell sources below (01-summation's in
summation_cells.py, the shared ones in common_cells.py).

The notebooks are generated so that their shared setup stays identical and
their JSON stays reviewable; edit this file, then run it:
    /usr/bin/python3 notebooks/make_notebooks.py
"""
import json
import pathlib

import precision_notebooks  # 03 and 08
import summation_cells
from common_cells import COMPARE, SAVE, setup

HERE = pathlib.Path(__file__).resolve().parent


NOTEBOOKS = {"01-summation": summation_cells.CELLS}

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
KM25 = Khattak & Mikaitis 2025 (fp32 output; the instruction each source measured)."""),
    ("code", COMPARE + """

PUBLISHED = {  # (preset, input, instruction): (terms per step, extra bits, accumulator bits, source)
    ("v100", "binary16", "default"): (4, 0, 23, "FHMP21 Sec. 5"),
    ("t4", "binary16", "default"): (4, 1, 23, "FHMP21 Sec. 5"),
    ("a100", "binary16", "default"): (8, 1, 23, "FHMP21 Sec. 6"),
    ("a100", "bfloat16", "default"): (8, 1, 23, "FHMP21 Sec. 6"),
    ("a100", "tf32", "default"): (4, 1, 23, "FHMP21 Sec. 6"),
    ("ada", "e4m3", "default"): (16, None, 13, "KM25 (13-bit FP8 accumulator)"),
    ("h100", "binary16", "default"): (16, 2, 23, "KM25"),
    ("h100", "e4m3", "wgmma"): (32, None, 13, "KM25 (wgmma; the default mma.sync is the fp16 path)"),
    ("b200", "e4m3", "default"): (32, 2, 23, "KM25 (no 13-bit accumulator)"),
}
rows = []
for (preset, inp, instr), (terms, extra, width, src) in PUBLISHED.items():
    r = fp32[(fp32.preset == preset) & (fp32.input_format == inp) & (fp32.instruction == instr)]
    if not len(r):
        continue
    r = r.iloc[0]
    rows.append((f"{preset} {inp} ({instr}): terms/step, extra bits, acc. bits",
                 f"{r.terms_per_step}, {r.extra}, {r.accumulator_fraction_bits}",
                 f"{terms}, {'-' if extra is None else extra}, {width}", src))
rows.append(("final rounding, fp32 output (all presets)", ", ".join(sorted(fp32.final_rounding.unique())),
             "rtz (truncation)", "FHMP21; KM25"))
compare(rows);"""),
]

NOTEBOOKS["03-underflow"] = precision_notebooks.underflow(setup, SAVE, COMPARE)

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
first = {}  # a trajectory (steps, scales, skips) -> the first scaler drawn with it
for name, g in trace.groupby("scaler", sort=False):
    same = first.setdefault((tuple(g.step), tuple(g.loss_scale), tuple(g.skipped)), name)
    if same == name:
        ax.step(g.step, g.loss_scale, where="post", label=name)
    else:
        # PyTorch's and Apex's scalers (Keras' and TF2's) move identically here: dashed over the
        # first one's line, so that both colours show and neither hides the other.
        ax.step(g.step, g.loss_scale, where="post", ls=(0, (3, 3)), lw=2.2, label=f"{name} (= {same}, dashed)")
        print(f"{name}: the same loss scale and skipped steps as {same} at every step")
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

import training_notebooks  # noqa: E402  (05 and 07: they read the shared setup above)

NOTEBOOKS["05-accuracy"] = training_notebooks.accuracy(setup, SAVE, COMPARE)
NOTEBOOKS["07-transformer"] = training_notebooks.transformer(setup, SAVE, COMPARE)

NOTEBOOKS["08-fixed-point"] = precision_notebooks.fixed_point(setup, SAVE, COMPARE)

import your_model_cells  # noqa: E402  (09: a run folder of rpsim.torch, not a study)

NOTEBOOKS["09-your-model"] = your_model_cells.your_model(SAVE, COMPARE, precision_notebooks.FP16_REGIONS)

import block_scaled_cells  # noqa: E402  (10: the block-scaled policies on the GPT)

NOTEBOOKS["10-block-scaled"] = block_scaled_cells.block_scaled(setup, SAVE, COMPARE)

import llama_cells  # noqa: E402  (11: the LLaMA-style decoder through rpsim.torch, llama_study.py)

NOTEBOOKS["11-llama-block-scaled"] = llama_cells.llama_block_scaled(setup, SAVE, COMPARE)


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
