"""The LLaMA-style study (issue #29; experiments/python/examples/llama_study.py): its quick mode trains
every run of its default table (bf16-amp, fp8, mxfp8, nvfp4, mxfp4, each a row of the C++ policy table)
beside the FP64 shadow, writes one curves.csv row per step per run with finite losses, and notebook 11
draws it; --recipes (issue #37) trains the recipe variants over several seeds. Skipped without torch;
the notebook without /usr/bin/jupyter-nbconvert."""
import csv
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: the LLaMA-style study is not run")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "experiments" / "python" / "examples"
sys.path.insert(0, str(EXAMPLES))
import llama_study  # noqa: E402

POLICIES = ["bf16-amp", "fp8", "mxfp8", "nvfp4", "mxfp4"]
NBCONVERT = pathlib.Path(os.environ.get("RPSIM_NBCONVERT", "/usr/bin/jupyter-nbconvert"))


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    with open(path) as f:
        header = f.readline().strip().split(",")
    return header, rows


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    out = results / llama_study.STUDY
    meta = llama_study.run(str(out), quick=True, log=lambda s: None)
    return results, out, meta


def test_every_run_is_a_policy_of_the_policy_table():
    names = rt.policies()  # the C++ policy table (sim/train/src/policy.cpp), as `rpsim train --help` lists it
    labels = [r[0] for r in llama_study.RUNS]
    assert list(llama_study.DEFAULT_RUNS) == POLICIES == labels[:len(POLICIES)]
    assert len(set(labels)) == len(labels) and set(llama_study.RECIPE_RUNS) <= set(labels)
    # A row is a policy name or a policy object over one (issue #37's recipe variants).
    assert {r[1] if isinstance(r[1], str) else r[1]["name"] for r in llama_study.RUNS} <= set(names)


def test_quick_study_writes_one_row_per_step_per_run(study):
    _, out, meta = study
    steps = llama_study.QUICK["steps"]
    header, curves = read(out / "curves.csv")
    assert header == llama_study.CURVES
    assert [r["run"] for r in curves] == [p for p in POLICIES for _ in range(steps)]
    assert [int(r["step"]) for r in curves] == list(range(steps)) * len(POLICIES)
    for r in curves:
        for c in ("loss_emulated_nats", "loss_fp64_nats", "loss_drift_nats", "weight_rel_distance_from_fp64_max"):
            assert math.isfinite(float(r[c])), (r["run"], r["step"], c)
        assert r["skipped"] == "0"
        assert float(r["loss_drift_nats"]) == pytest.approx(float(r["loss_emulated_nats"]) - float(r["loss_fp64_nats"]))
    # Same initial weights and batches in every run: the FP64 shadows are the same run, bit for bit.
    shadows = {p: [r["loss_fp64_nats"] for r in curves if r["run"] == p] for p in POLICIES}
    assert all(s == shadows["bf16-amp"] for s in shadows.values())
    # Each policy took effect: its losses are not the shadow's, and no two policies give the same curve.
    emulated = {p: tuple(r["loss_emulated_nats"] for r in curves if r["run"] == p) for p in POLICIES}
    assert len(set(emulated.values())) == len(POLICIES)
    for p in POLICIES:
        assert any(float(r["loss_drift_nats"]) != 0 for r in curves if r["run"] == p)
    # The block-scaled runs drift further from the shadow's weights than bf16 does.
    final = {r["run"]: float(r["weight_rel_distance_from_fp64_max"]) for r in curves}
    assert min(final[p] for p in ("mxfp8", "nvfp4", "mxfp4")) > final["bf16-amp"]
    assert meta["study"] == llama_study.STUDY and meta["quick"] is True
    files = json.loads((out / "meta.json").read_text())["files"]
    assert files == ["curves.csv", "evaluations.csv", "summary.csv"] + [f"runs/{p}" for p in POLICIES]


def test_quick_study_summary_and_evaluations(study):
    _, out, _ = study
    header, summary = read(out / "summary.csv")
    assert header == llama_study.SUMMARY
    assert [r["run"] for r in summary] == POLICIES
    for r in summary:
        assert int(r["steps"]) == llama_study.QUICK["steps"] and int(r["parameters"]) > 0
        for c in ("final_loss_emulated_nats", "final_loss_fp64_nats", "test_loss_emulated_nats",
                  "test_loss_fp64_nats", "test_loss_gap_nats"):
            assert math.isfinite(float(r[c]))
        # The quick run starts near ln(128) = 4.85 nats; FP4 moves it by per cent, not more.
        assert abs(float(r["test_loss_gap_nats"])) < 0.05 * float(r["test_loss_fp64_nats"])
    header, evals = read(out / "evaluations.csv")
    assert header == llama_study.EVALUATIONS
    every = llama_study.QUICK["eval_every"]
    assert [int(r["step"]) for r in evals if r["run"] == "nvfp4"] == list(range(0, llama_study.QUICK["steps"] + 1,
                                                                                    every))
    # The Trainer's own files per run, with nvfp4's block-scale columns.
    cols = (out / "runs" / "nvfp4" / "steps.csv").read_text().splitlines()[0]
    assert "x_fp8_scale_max" in cols


def test_bad_runs_and_seeds_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="'nope'|nope.*known: bf16-amp, fp8, mxfp8, nvfp4, mxfp4"):
        llama_study.run(str(tmp_path), quick=True, runs="nope")
    r = subprocess.run([sys.executable, str(EXAMPLES / "llama_study.py"), "--runs", "mxfp8,nope", "--out",
                        str(tmp_path / "x")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "nope is not a run of the study" in r.stderr and "mxfp4" in r.stderr
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="--seed: -1 is negative"):
        llama_study.run(str(tmp_path), quick=True, seed=-1)
    with pytest.raises(TypeError, match="--seed: '3' is not an integer"):
        llama_study.run(str(tmp_path), quick=True, seed="3")
    r = subprocess.run([sys.executable, str(EXAMPLES / "llama_study.py"), "--seed", "-1", "--out", str(tmp_path / "x")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--seed: -1 is negative" in r.stderr
    assert not (tmp_path / "x").exists()


def test_notebook_11_draws_the_study(study, source_dir):
    results, _, _ = study
    if not NBCONVERT.exists():
        pytest.skip(f"{NBCONVERT} absent (apt-get install jupyter-nbconvert): notebook 11 not executed")
    r = subprocess.run(["bash", str(source_dir / "notebooks" / "render.sh"), str(results), "11"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    figures = results / "figures"
    assert (figures / "11-llama-block-scaled.png").stat().st_size > 10000
    assert "<table" in (figures / "11-llama-block-scaled.html").read_text()
    table = (figures / "11-llama-block-scaled.md").read_text()
    for p in POLICIES:
        assert f"| {p}: final training loss minus its FP64 shadow" in table
    assert "nvfp4 minus fp8, held-out loss (relative) | " in table


def test_a_run_alone_repeats_its_curve_bit_for_bit(study, tmp_path):
    """nvfp4's stochastic rounding and Hadamard signs are keyed by the seed, not by what ran before:
    the run trained alone writes the same bytes as in the whole study."""
    _, out, _ = study
    llama_study.run(str(tmp_path), quick=True, runs=["nvfp4"], log=lambda s: None)
    for name in ("curves.csv", "evaluations.csv"):
        whole = [line for line in (out / name).read_text().splitlines() if line.startswith("nvfp4,")]
        alone = (tmp_path / name).read_text().splitlines()[1:]
        assert whole and alone == whole, name


def test_recipe_runs_over_seeds(tmp_path):
    """--recipes --seeds: one row per run and seed, the policy object written as the sweep writes a grid
    value, each seed's runs in runs/<label>/seed-<s>/; every run of a seed shares one FP64 shadow, and
    torchao's rceil rule took effect (the Trainer's policy says so and its curve is not floor's)."""
    meta = llama_study.run(str(tmp_path), quick=True, recipes=True, runs="mxfp8,mxfp8-rceil", seeds=[0, 1],
                           log=lambda s: None)
    assert meta["study"] == llama_study.RECIPES_STUDY and meta["seeds"] == [0, 1] and "seed" not in meta
    header, summary = read(tmp_path / "summary.csv")
    assert header == llama_study.SUMMARY
    assert [(r["run"], r["seed"]) for r in summary] == [("mxfp8", "0"), ("mxfp8", "1"), ("mxfp8-rceil", "0"),
                                                        ("mxfp8-rceil", "1")]
    assert [r["policy"] for r in summary][1:3] == ["mxfp8", '{"fp8":{"scale_rule":"rceil"},"name":"mxfp8"}']
    trainer = json.loads((tmp_path / "runs" / "mxfp8-rceil" / "seed-1" / "meta.json").read_text())
    assert trainer["policy"]["fp8"]["scale_rule"] == "rceil" and trainer["seed"] == 1
    _, curves = read(tmp_path / "curves.csv")

    def curve(run, seed, column):
        return [r[column] for r in curves if r["run"] == run and r["seed"] == seed]
    for seed in ("0", "1"):
        assert curve("mxfp8", seed, "loss_fp64_nats") == curve("mxfp8-rceil", seed, "loss_fp64_nats")
        assert curve("mxfp8", seed, "loss_emulated_nats") != curve("mxfp8-rceil", seed, "loss_emulated_nats")
    assert curve("mxfp8", "0", "loss_fp64_nats") != curve("mxfp8", "1", "loss_fp64_nats")


def test_bad_seed_lists_are_refused_by_name(tmp_path):
    assert llama_study.parse_seeds("0, 1,2") == [0, 1, 2]
    for spec, message in (("0,x", "--seeds: 'x' is not an integer"), ("1,1", "--seeds: 1 is given twice"),
                          ("0,-2", "--seeds: -2 is negative"), ("", "--seeds: '' is not an integer")):
        with pytest.raises(ValueError, match=message):
            llama_study.parse_seeds(spec)
    with pytest.raises(ValueError, match="repeats a seed"):
        llama_study.run(str(tmp_path), quick=True, seeds=[3, 3])
    r = subprocess.run([sys.executable, str(EXAMPLES / "llama_study.py"), "--seed", "1", "--seeds", "0,1",
                        "--out", str(tmp_path / "x")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--seed and --seeds: give one of them" in r.stderr
    assert not (tmp_path / "x").exists()
