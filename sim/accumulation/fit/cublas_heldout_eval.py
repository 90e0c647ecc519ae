"""Scores the cublas presets on a held-out capture (cublas_grid_capture.py --heldout: heldout.json +
heldout.npz, never read by a fit), issue #40's three ways, per kind:

  recorded  the schedule the case's own record names (cuBLASLt's heuristic answer for the call and the
            kernels it launched), as gemm-check reads a capture_gemms record; the preset's guess where the
            record names a kernel no schedule models;
  table     the preset with the heuristic table alone (TABLE, given as the preset's GPU table), no record;
  guess     the preset with no table (the measured H100 grid's nearest shape).

A GEMM counts as bit-exact when all three stored blocks of D are. The arithmetic is rpsim's, through
build/sim/cublas_fit_eval (one block a line); the script imports no rpsim module.

Usage: python3 sim/accumulation/fit/cublas_heldout_eval.py CAPTURE_DIR [--name heldout] [--table FILE]
           [--eval PATH] [--json OUT] [--limit N]
Prints per kind and mode `bit-exact/total`, and for the recorded mode the schedule families of the misses.
"""
import collections
import importlib.util
import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
# The preset spec of each held-out kind (cublas_grid_capture.HELDOUT)
PRESET = {"tf32_fp32": "cublas:h100:tf32:fp32", "fp16_fp32": "cublas:h100:fp16:fp32",
          "fp16_fp16_red0": "cublas:h100:fp16:fp16:rpr=0", "fp16_fp16_red1": "cublas:h100:fp16:fp16:rpr=1",
          "bf16_bf16_red0": "cublas:h100:bf16:bf16:rpr=0", "bf16_bf16_red1": "cublas:h100:bf16:bf16:rpr=1",
          "e4m3_float32": "cublas:h100:e4m3:fp32"}
MODES = ("recorded", "table", "guess")


def load_grid_fit():
    """cublas_h100_grid.py (its Evaluator, the one client of build/sim/cublas_fit_eval), loaded by path."""
    spec = importlib.util.spec_from_file_location("cublas_h100_grid", os.path.join(HERE, "cublas_h100_grid.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def score(case, blocks, ev, record):
    """(all three blocks bit-exact, the schedule's source)."""
    ok, source = True, ""
    for (r, c), d in zip(case["blocks"], blocks):
        got, source = ev.block_and_source(case, r, c, PRESET[case["variant"]], record=record)
        rows, cols = d.shape
        ok &= bool(np.array_equal(got[:rows, :cols], d.astype(np.float32).view(np.uint32)))
    return ok, source


def gemm_kernels(kernels):
    """The kernels of the GEMM itself: the capture's profiled call also casts its float32 operands
    (at::native copy and elementwise kernels), which capture_gemms, below the dispatcher, never sees."""
    return [k for k in kernels if "at::native::" not in k["name"]]


def family(source):
    """A schedule source without its numbers, to count misses by kind of kernel."""
    words = source.replace(",", " ").split()
    return " ".join(w for w in words[:6] if not any(ch.isdigit() for ch in w))


def main(argv):
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    opt = {argv[i]: argv[i + 1] for i in range(1, len(argv) - 1) if argv[i].startswith("--")}
    capture = argv[0]
    name = opt.get("--name", "heldout")
    with open(os.path.join(capture, f"{name}.json")) as f:
        meta = json.load(f)
    blocks = np.load(os.path.join(capture, f"{name}.npz"))
    cases = [c for c in meta["cases"] if "error" not in c][: int(opt.get("--limit", 10**9))]
    path = opt.get("--eval", os.path.join(ROOT, "build", "sim", "cublas_fit_eval"))
    Evaluator = load_grid_fit().Evaluator
    with tempfile.TemporaryDirectory() as with_table, tempfile.TemporaryDirectory() as without:
        if "--table" in opt:
            shutil.copy(opt["--table"], os.path.join(with_table, "cublas-h100.txt"))
        # recorded falls back to the guess (as the shipped presets, which hold no table, do)
        evs = {"recorded": Evaluator(path, without), "table": Evaluator(path, with_table),
               "guess": Evaluator(path, without)}
        tally = collections.defaultdict(lambda: [0, 0])
        misses = collections.Counter()
        for case in cases:
            record = {"cublas": {"heuristic": case["heuristic"], "kernels": gemm_kernels(case["kernels"])}}
            d3 = blocks[f"d{case['i']}"]
            for mode in MODES if "--table" in opt else ("recorded", "guess"):
                ok, source = score(case, d3, evs[mode], record if mode == "recorded" else None)
                tally[(case["variant"], mode)][0] += ok
                tally[(case["variant"], mode)][1] += 1
                if mode == "recorded" and not ok:
                    misses[(case["variant"], family(source))] += 1
        for ev in evs.values():
            ev.close()
    print(f"held-out capture {capture}: {meta['device']}, torch {meta['torch']}, {len(cases)} GEMMs")
    rows = {}
    for variant in PRESET:
        cells = []
        for mode in MODES:
            if (variant, mode) in tally:
                ok, n = tally[(variant, mode)]
                cells.append(f"{mode} {ok}/{n} ({100 * ok / max(n, 1):.2f} %)")
                rows.setdefault(variant, {})[mode] = [ok, n]
        print(f"  {variant:16s} " + "   ".join(cells))
    print("recorded misses by schedule source:")
    for (variant, fam), n in misses.most_common(30):
        print(f"  {n:5d}  {variant:16s} {fam}")
    if "--json" in opt:
        with open(opt["--json"], "w") as f:
            json.dump({"device": meta["device"], "torch": meta["torch"], "kinds": rows,
                       "misses": [[v, fam, n] for (v, fam), n in misses.most_common()]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
