"""The LLaMA-style study (issue #29): llama_style.py's decoder (RMSNorm, rotary embeddings, SwiGLU: a
model `rpsim train`'s layer list cannot express, so the study is driven from Python, not a row of
`rpsim study`) trained through rpsim.torch.Trainer on Debian's fortunes under bf16 autocast,
per-tensor FP8 (delayed scaling), OCP MXFP8, NVIDIA's NVFP4 recipe and OCP MXFP4, each beside an
FP64 shadow stepped in lockstep from the same weights on the same batches. Notebook 11 draws it.
`--recipes` is issue #37's recipe study instead: per-tensor FP8, FP8 block scaling, MXFP8 under the
OCP floor and torchao's rceil scale rule, NVFP4 under TE's te-2026-03 and te-2026-02 formulas, longer
runs (RECIPES) over seeds 0, 1, 2 (recipes_study_report.py reads it).

  PYTHONPATH=build/python /usr/bin/python3 experiments/python/examples/llama_study.py \
      --out results/llama-block-scaled [--quick] [--runs bf16-amp,nvfp4] [--seeds 0,1,2] [--recipes]

Writes into --out: curves.csv (one row per run and step: the training loss of the run and of its
shadow, their difference, the largest per-layer weight distance from the shadow), evaluations.csv
(held-out loss of both every eval_every steps), summary.csv (one row per run), meta.json (as
`rpsim study` writes it: study, quick, config, git_commit, wall_time_s, files) and runs/<label>/ (the
Trainer's own steps.csv, evaluations.csv, meta.json: per-layer and block-scale columns; runs/<label>/seed-<s>/
when several seeds run)."""
import argparse
import csv
import io
import json
import math
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rpsim.torch as rt  # noqa: E402
from rpsim.torch._run_files import write_atomic  # noqa: E402
import llama_style  # noqa: E402

STUDY = "llama-block-scaled"
RECIPES_STUDY = "llama-recipes"
RECIPES_QUESTION = ("How far from its FP64 shadow, and from bf16, does the LLaMA-style decoder train under per-tensor "
                    "FP8, FP8 block scaling, MXFP8 (OCP floor vs torchao rceil) and NVFP4 (TE te-2026-03 vs "
                    "te-2026-02), over seeds?")
QUESTION = ("How far from its FP64 shadow does the LLaMA-style decoder train under bf16, per-tensor FP8, "
            "MXFP8, NVFP4 and MXFP4?")

# The study's runs, one row each: label, the policy table's row (sim/train/src/policy.cpp,
# `rpsim train --help`) or a policy object over it (as a config's "policy"), what it stands for.
# Every GEMM accumulates in binary32 (the policies' default), so the runs differ in how the GEMM
# inputs are quantised. The default study (notebook 11) trains DEFAULT_RUNS; --recipes RECIPE_RUNS.
RUNS = (
    ("bf16-amp", "bf16-amp", "torch.autocast to bfloat16, binary32 master weights"),
    ("fp8", "fp8", "e4m3 forward / e5m2 backward, delayed per-tensor scaling (Transformer Engine)"),
    ("mxfp8", "mxfp8", "OCP MXFP8: e4m3 / e5m2 in blocks of 32 with E8M0 scales (MX v1.0)"),
    ("nvfp4", "nvfp4", "NVIDIA's NVFP4 recipe (arXiv:2509.25149): e2m1, 1x16 E4M3-scaled blocks, 16x16 "
     "weight blocks, RHT on wgrad, SR gradients, last linear in bf16"),
    ("mxfp4", "mxfp4", "OCP MXFP4: e2m1 in blocks of 32 with E8M0 scales"),
    ("fp8-blockwise", "fp8-blockwise", "FP8 block scaling (DeepSeek-V3, TE Float8BlockScaling): e4m3 both ways, "
     "1x128 activation/gradient blocks, 128x128 weight tiles, power-of-two scales"),
    ("mxfp8-rceil", {"name": "mxfp8", "fp8": {"scale_rule": "rceil"}},
     "MXFP8 with torchao's RCEIL E8M0 scale rule (its default) instead of the OCP floor"),
    ("nvfp4-te-2026-02", {"name": "nvfp4", "fp8": {"nvfp4_formula": "te-2026-02"}},
     "NVFP4 on TE's quantiser before commit 523801d (block scale fp32(amax_b/6) * s_enc)"),
)
DEFAULT_RUNS = ("bf16-amp", "fp8", "mxfp8", "nvfp4", "mxfp4")
RECIPE_RUNS = ("bf16-amp", "fp8", "fp8-blockwise", "mxfp8", "mxfp8-rceil", "nvfp4", "nvfp4-te-2026-02")
RECIPE_SEEDS = (0, 1, 2)

# Full: the model of notebook 09's run (your_model_run.py); 40 steps as the GPT's block-scaled study,
# since the block-scaled runs cost about 2.5 times bf16's. Quick: CI-sized (about 15 s for all runs).
FULL = {"dim": 64, "layers": 2, "heads": 4, "hidden": 172, "seq": 32, "batch": 8, "steps": 40,
        "eval_every": 10, "eval_batches": 4, "lr": 3e-3, "max_grad_norm": 1.0}
# --recipes: FULL's model and learning rate for RECIPES_STEPS steps, long enough that the FP64 shadow's
# held-out loss falls well below the text's unigram entropy (3.34 nats/char over the first 400,000
# characters); the seven runs cost about 2.8 s per step together (fp8-blockwise 1 s), so three seeds
# take about 14 minutes on the loaded 2-core machine.
RECIPES_STEPS, RECIPES_EVAL_EVERY = 100, 20
RECIPES = dict(FULL, steps=RECIPES_STEPS, eval_every=RECIPES_EVAL_EVERY)
QUICK = {"dim": 32, "layers": 1, "heads": 2, "hidden": 64, "seq": 16, "batch": 4, "steps": 6,
         "eval_every": 3, "eval_batches": 1, "lr": 3e-3, "max_grad_norm": 1.0}

CURVES = ["run", "policy", "seed", "step", "loss_emulated_nats", "loss_fp64_nats", "loss_drift_nats", "grad_norm",
          "skipped", "weight_rel_distance_from_fp64_max", "weight_rel_distance_from_fp64_max_layer"]
EVALUATIONS = ["run", "policy", "seed", "step", "test_loss_emulated_nats", "test_loss_fp64_nats", "test_loss_gap_nats"]
SUMMARY = ["run", "policy", "seed", "parameters", "steps", "skipped_steps", "final_loss_emulated_nats", "final_loss_fp64_nats",
           "final_loss_drift_nats", "max_abs_loss_drift_nats", "final_weight_rel_distance_from_fp64_max",
           "final_weight_rel_distance_from_fp64_max_layer",
           "test_loss_emulated_nats", "test_loss_fp64_nats", "test_loss_gap_nats", "wall_s"]


def run_labels(spec, default=DEFAULT_RUNS):
    """The runs a comma-separated list names (`default` for None), in the table's order; ValueError
    naming an unknown one and the known ones."""
    known = [r[0] for r in RUNS]
    if spec is None:
        return list(default)
    asked = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in asked if s not in known]
    if unknown or not asked:
        raise ValueError(f"--runs: {','.join(unknown) or repr(spec)} is not a run of the study "
                         f"(known: {', '.join(known)})")
    return [k for k in known if k in asked]


def check_seed(seed, option="--seed"):
    """The seed keys the weights, the batches and the recipes' random bits (rpsim's seeds are unsigned)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"{option}: {seed!r} is not an integer")
    if seed < 0:
        raise ValueError(f"{option}: {seed} is negative (the seed keys rpsim's unsigned random streams)")


def parse_seeds(spec):
    """The seeds a comma-separated list names ("0,1,2"), each checked as --seed is; ValueError naming a
    bad or repeated one."""
    seeds = []
    for s in spec.split(","):
        try:
            seed = int(s.strip())
        except ValueError:
            raise ValueError(f"--seeds: {s.strip()!r} is not an integer (expected a list such as 0,1,2)") from None
        if seed in seeds:
            raise ValueError(f"--seeds: {seed} is given twice")
        check_seed(seed, "--seeds")
        seeds.append(seed)
    return seeds


def policy_text(policy):
    """A policy as `rpsim sweep` writes a grid value into summary.csv: its name, or the object as
    compact JSON with sorted keys, so that recipes_study_report.py reads both alike."""
    return policy if isinstance(policy, str) else json.dumps(policy, sort_keys=True, separators=(",", ":"))


def _cell(v):
    """Numbers as the CLI writes them (%.17g; nan, inf)."""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else "%.17g" % v
    return str(v)


def _table(columns, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_cell(r[c]) for c in columns])
    return buf.getvalue()


def _write_atomic(path, text):
    """Replaced at once, with the umask's mode (0644 under 022), as the CLI's files."""
    write_atomic(path, text, "llama_study")


def _float(s):
    return float(s) if s not in ("", None) else math.nan


def _curve_rows(label, policy, seed, steps_csv):
    """curves.csv's rows from the Trainer's steps.csv (its columns as `rpsim train` writes them)."""
    rows = []
    for r in csv.DictReader(io.StringIO(steps_csv)):
        tail = "_weight_rel_distance_from_fp64"
        dists = [(_float(v), k[:-len(tail)]) for k, v in r.items() if k.endswith(tail) and v != ""]
        far = max(dists, default=(math.nan, ""))
        e, s = _float(r["loss_emulated_nats"]), _float(r["loss_fp64_nats"])
        rows.append({"run": label, "policy": policy_text(policy), "seed": seed, "step": int(r["step"]), "loss_emulated_nats": e,
                     "loss_fp64_nats": s, "loss_drift_nats": e - s, "grad_norm": _float(r["grad_norm"]),
                     "skipped": int(r["skipped"]), "weight_rel_distance_from_fp64_max": far[0],
                     "weight_rel_distance_from_fp64_max_layer": far[1]})
    return rows


def train_one(label, policy, cfg, seed, out, study=STUDY):
    """One run beside its shadow; returns (curve rows, evaluation rows, summary row)."""
    start = time.time()
    model = llama_style.make_model(dim=cfg["dim"], layers=cfg["layers"], heads=cfg["heads"],
                                   hidden=cfg["hidden"], max_seq=cfg["seq"], seed=seed)
    # Same weights (make_model's seed) and same batches in every run: only the policy differs.
    train = llama_style.fortunes_batches(cfg["batch"], cfg["seq"], cfg["steps"], seed)
    test = llama_style.fortunes_batches(cfg["batch"], cfg["seq"], cfg["eval_batches"], seed + 1)
    t = rt.Trainer(model, policy, lambda p: torch.optim.AdamW(p, lr=cfg["lr"]), out=out, seed=seed,
                   name=f"{study}/{label}", histogram_steps=(), max_grad_norm=cfg["max_grad_norm"])
    t.evaluate(test)
    for i, (x, y) in enumerate(train, 1):
        t.step(x, y)
        if i % cfg["eval_every"] == 0 or i == len(train):
            t.evaluate(test)
    meta = t.finish()
    curves = _curve_rows(label, policy, seed, t.steps_csv)
    evals = [{"run": label, "policy": policy_text(policy), "seed": seed, "step": e["step"], "test_loss_emulated_nats": e["test_loss_nats"],
              "test_loss_fp64_nats": e["shadow_test_loss_nats"],
              "test_loss_gap_nats": e["test_loss_nats"] - e["shadow_test_loss_nats"]} for e in t.evaluations]
    last, final = curves[-1], evals[-1]
    summary = {"run": label, "policy": policy_text(policy), "seed": seed, "parameters": meta["parameters"], "steps": meta["steps"],
               "skipped_steps": meta["skipped_steps"],
               "final_loss_emulated_nats": last["loss_emulated_nats"], "final_loss_fp64_nats": last["loss_fp64_nats"],
               "final_loss_drift_nats": last["loss_drift_nats"],
               "max_abs_loss_drift_nats": max(abs(c["loss_drift_nats"]) for c in curves),
               "final_weight_rel_distance_from_fp64_max": last["weight_rel_distance_from_fp64_max"],
               "final_weight_rel_distance_from_fp64_max_layer": last["weight_rel_distance_from_fp64_max_layer"],
               "test_loss_emulated_nats": final["test_loss_emulated_nats"],
               "test_loss_fp64_nats": final["test_loss_fp64_nats"], "test_loss_gap_nats": final["test_loss_gap_nats"],
               "wall_s": time.time() - start}
    return curves, evals, summary


def git_commit():
    """The commit of the checkout this script is in, or "unknown" outside a git tree."""
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=os.path.dirname(os.path.abspath(__file__)),
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "unknown"
    except OSError:
        return "unknown"


def _seeds_of(seed, seeds, recipes):
    """The seeds to run: `seeds` (checked, no repeats), else RECIPE_SEEDS under recipes, else [seed]."""
    if seeds is None:
        seeds = RECIPE_SEEDS if recipes else (seed,)
    seeds = list(seeds)
    for s in seeds:
        check_seed(s, "--seeds")
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds: {seeds} is empty or repeats a seed")
    return seeds


def run(out, quick=False, runs=None, seed=0, log=print, *, seeds=None, recipes=False):
    """Trains the runs (labels of RUNS; DEFAULT_RUNS for None, RECIPE_RUNS under `recipes`) for each
    seed (`seeds`; [seed] by default, RECIPE_SEEDS under `recipes`) and writes the study's files into
    `out`; returns meta. `recipes` trains RECIPES's length unless `quick`."""
    cfg = dict(QUICK if quick else RECIPES if recipes else FULL)
    spec = runs if isinstance(runs, (str, type(None))) else ",".join(runs)
    labels = run_labels(spec, RECIPE_RUNS if recipes else DEFAULT_RUNS)
    check_seed(seed)
    seeds = _seeds_of(seed, seeds, recipes)
    study = RECIPES_STUDY if recipes else STUDY
    policy_of = {r[0]: r[1] for r in RUNS}
    os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    start = time.time()
    curves, evals, summary = [], [], []
    for label in labels:
        for s in seeds:
            folder = os.path.join(out, "runs", label, *([f"seed-{s}"] if len(seeds) > 1 else []))
            c, e, row = train_one(label, policy_of[label], cfg, s, folder, study)
            curves += c
            evals += e
            summary.append(row)
            log(f"{study}: {label}{f' seed {s}' if len(seeds) > 1 else ''}: final loss "
                f"{row['final_loss_emulated_nats']:.4f} (FP64 shadow {row['final_loss_fp64_nats']:.4f}, drift "
                f"{row['final_loss_drift_nats']:+.4f}), test gap {row['test_loss_gap_nats']:+.4f} nats, "
                f"{row['wall_s']:.1f} s")
    files = {"curves.csv": _table(CURVES, curves), "evaluations.csv": _table(EVALUATIONS, evals),
             "summary.csv": _table(SUMMARY, summary)}
    for name, text in files.items():
        _write_atomic(os.path.join(out, name), text)
    synthetic = llama_style.fortunes_text() is None
    meta = {"study": study, "question": RECIPES_QUESTION if recipes else QUESTION, "quick": quick,
            **({"seed": seeds[0]} if len(seeds) == 1 else {}), "seeds": seeds, "front_end": "rpsim.torch",
            "model": "llama_style.make_model (RMSNorm, rotary embeddings, SwiGLU)",
            "config": {"train": cfg, "runs": [{"label": r[0], "policy": r[1], "why": r[2]} for r in RUNS
                                              if r[0] in labels]},
            "data_set": "random characters (fortunes not installed)" if synthetic else
            f"Debian's fortunes ({llama_style.FORTUNES}), characters; test: other random windows of the same text",
            "parameters": summary[0]["parameters"], "synthetic_data": synthetic, "git_commit": git_commit(),
            "wall_time_s": time.time() - start,
            "files": sorted(files) + [f"runs/{label}" for label in labels]}
    _write_atomic(os.path.join(out, "meta.json"), json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="runs: " + "; ".join(f"{r[0]} ({r[2]})" for r in RUNS))
    ap.add_argument("--out", help=f"the study's folder (default results/{STUDY}, results/{RECIPES_STUDY} "
                    "under --recipes)")
    ap.add_argument("--quick", action="store_true", help="the CI-sized model and 6 steps per run")
    ap.add_argument("--runs", help=f"comma-separated labels of the runs to train (default: {','.join(DEFAULT_RUNS)}; "
                    f"under --recipes {','.join(RECIPE_RUNS)})")
    ap.add_argument("--seed", type=int, help="the one seed to run (default 0)")
    ap.add_argument("--seeds", help="comma-separated seeds, each run once per seed (default under --recipes: "
                    f"{','.join(map(str, RECIPE_SEEDS))})")
    ap.add_argument("--recipes", action="store_true", help="issue #37's recipe study: RECIPE_RUNS, "
                    f"{RECIPES_STEPS} steps per run (with --quick: the CI size), seeds {','.join(map(str, RECIPE_SEEDS))}")
    a = ap.parse_args(argv)
    try:
        if a.seed is not None and a.seeds is not None:
            raise ValueError("--seed and --seeds: give one of them")
        run_labels(a.runs)
        if a.seed is not None:
            check_seed(a.seed)
        seeds = parse_seeds(a.seeds) if a.seeds is not None else None if a.seed is None else [a.seed]
        _seeds_of(0, seeds, a.recipes)
    except ValueError as e:
        ap.error(str(e))  # exit status 2, as the CLI's bad input
    out = a.out or f"results/{RECIPES_STUDY if a.recipes else STUDY}"
    meta = run(out, a.quick, a.runs, 0, seeds=seeds, recipes=a.recipes)
    print(f"{meta['study']} ({'quick' if a.quick else 'full'}): {meta['wall_time_s']:.1f} s; files in {out}")


if __name__ == "__main__":
    main()
