"""Issue #37's recipe-study report (experiments/python/examples/recipes_study_report.py) on a tiny run of
both halves: the shipped sweep-recipes.json at 2 steps per run over seeds 0 and 1 (`rpsim sweep`) and
`llama_study.py --recipes --quick --seeds 0,1`. Its means, spreads and paired differences are
recomputed here from the runs' own evaluations.csv files. Skipped without torch (the LLaMA-style half)
or without the rpsim command (RPSIM_BINARY)."""
import csv
import json
import math
import pathlib
import statistics
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: the LLaMA-style study is not run")
rpsim = pytest.importorskip("rpsim")

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "experiments" / "python" / "examples"
sys.path.insert(0, str(EXAMPLES))
import llama_study  # noqa: E402
import recipes_study_report as report  # noqa: E402

RECIPES = ["bf16-amp", "fp8", "fp8-blockwise", "mxfp8 floor", "mxfp8 rceil", "nvfp4 te-2026-03", "nvfp4 te-2026-02"]


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def last_eval(path):
    last = max(rows(path), key=lambda r: int(r["step"]))
    return float(last["test_loss_emulated_nats"]), float(last["test_loss_fp64_nats"])


@pytest.fixture(scope="module")
def studies(tmp_path_factory, rpsim_binary, source_dir):
    tmp = tmp_path_factory.mktemp("recipes")
    configs = source_dir / "experiments" / "configs"
    sweep = json.loads((configs / "sweep-recipes.json").read_text())
    sweep["base"] = json.loads((configs / sweep["base"]).read_text())
    sweep["base"]["steps"] = 2
    sweep["grid"]["seed"] = [0, 1]
    (tmp / "sweep.json").write_text(json.dumps(sweep))
    r = subprocess.run([rpsim_binary, "sweep", str(tmp / "sweep.json"), "--jobs", "1", "--out", str(tmp / "gpt")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    llama_study.run(str(tmp / "llama"), quick=True, recipes=True, seeds=[0, 1], log=lambda s: None)
    return tmp


@pytest.fixture(scope="module")
def reported(studies):
    out = subprocess.run([sys.executable, str(EXAMPLES / "recipes_study_report.py"), "--gpt", str(studies / "gpt"),
                          "--llama", str(studies / "llama"), "--csv", str(studies / "report.csv"),
                          "--figure", str(studies / "12-recipes.png")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    table = {(r["model"], r["row"]): r for r in rows(studies / "report.csv")}
    return out.stdout, table


def test_every_recipe_and_pair_of_both_models_is_reported(reported):
    _, table = reported
    for model in ("GPT", "LLaMA-style"):
        for k in RECIPES:
            assert table[(model, k)]["seeds"] == "0 1", (model, k)
        for pair in ("mxfp8 rceil - mxfp8 floor", "nvfp4 te-2026-02 - nvfp4 te-2026-03", "nvfp4 te-2026-03 - fp8"):
            assert table[(model, pair)]["seeds"] == "0 1", (model, pair)


def test_gpt_gap_mean_and_spread_are_the_sweeps_own_numbers(studies, reported):
    stdout, table = reported
    gaps = []
    for r in rows(studies / "gpt" / "summary.csv"):
        policy = json.loads(r["policy"]) if r["policy"].startswith("{") else {"name": r["policy"]}
        if policy.get("fp8", {}).get("scale_rule") == "rceil":
            loss, shadow = last_eval(studies / "gpt" / r["run_id"] / "evaluations.csv")
            gaps.append(loss - shadow)
    assert len(gaps) == 2
    row = table[("GPT", "mxfp8 rceil")]
    assert float(row["gap_mean_nats"]) == pytest.approx((gaps[0] + gaps[1]) / 2, abs=1e-15)
    assert float(row["gap_std_nats"]) == pytest.approx(statistics.stdev(gaps), abs=1e-15)
    assert "| mxfp8 rceil | 0 1 |" in stdout and "%+.4f" % ((gaps[0] + gaps[1]) / 2) in stdout


def test_llama_paired_difference_and_reference_are_the_studys_own_numbers(studies, reported):
    _, table = reported
    evals = rows(studies / "llama" / "evaluations.csv")

    def final(run, seed):
        last = max((r for r in evals if r["run"] == run and r["seed"] == str(seed)), key=lambda r: int(r["step"]))
        return float(last["test_loss_emulated_nats"]), float(last["test_loss_fp64_nats"])

    diffs = []
    for seed in (0, 1):
        (a, a64), (b, b64) = final("nvfp4-te-2026-02", seed), final("nvfp4", seed)
        diffs.append((a - a64) - (b - b64))
    row = table[("LLaMA-style", "nvfp4 te-2026-02 - nvfp4 te-2026-03")]
    assert float(row["gap_mean_nats"]) == pytest.approx(sum(diffs) / 2, abs=1e-15)
    assert row["per_seed_nats"] == " ".join("%+.6f" % d for d in diffs)
    # NVFP4 against FP8, relative to FP8's loss of the same seed, in per cent.
    rel = [100 * (final("nvfp4", s)[0] - final("fp8", s)[0]) / final("fp8", s)[0] for s in (0, 1)]
    row = table[("LLaMA-style", "nvfp4 te-2026-03 - fp8")]
    assert float(row["gap_rel_mean_pct"]) == pytest.approx(sum(rel) / 2, abs=1e-12)
    # fp8 relative to bf16-amp of the same seed, in per cent.
    rel = [100 * (final("fp8", s)[0] - final("bf16-amp", s)[0]) / final("bf16-amp", s)[0] for s in (0, 1)]
    assert float(table[("LLaMA-style", "fp8")]["vs_reference_rel_mean_pct"]) == pytest.approx(sum(rel) / 2, abs=1e-12)
    assert float(table[("LLaMA-style", "bf16-amp")]["vs_reference_rel_mean_pct"]) == 0


def test_the_figure_is_drawn(studies, reported):
    png = (studies / "12-recipes.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000


def test_a_policy_names_one_recipe_however_it_is_written():
    assert report.recipe_label("mxfp8") == report.recipe_label('{"fp8":{"scale_rule":"floor"},"name":"mxfp8"}')
    assert report.recipe_label('{"fp8":{"scale_rule":"rceil"},"name":"mxfp8"}') == "mxfp8 rceil"
    policy = {r[0]: r[1] for r in llama_study.RUNS}["nvfp4-te-2026-02"]
    assert report.recipe_label(llama_study.policy_text(policy)) == "nvfp4 te-2026-02"
    assert report.recipe_label("nvfp4") == "nvfp4 te-2026-03" and report.recipe_label("fp8") == "fp8"
    with pytest.raises(report.ReportError, match="no \"name\""):
        report.recipe_label('{"fp8": {}}')


def test_bad_folders_are_errors_naming_the_file_or_column(studies, tmp_path):
    script = [sys.executable, str(EXAMPLES / "recipes_study_report.py")]
    r = subprocess.run(script + ["--gpt", str(tmp_path / "none")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and f"{tmp_path / 'none' / 'summary.csv'}: no such file" in r.stderr
    r = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "give --gpt DIR, --llama DIR or both" in r.stderr
    # A LLaMA study written without the seed column (before --seeds), and a run given twice.
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "summary.csv").write_text("run,policy\nfp8,fp8\n")
    (tmp_path / "old" / "evaluations.csv").write_text("run,step\n")
    with pytest.raises(report.ReportError, match=r"summary.csv: no column seed"):
        report.read_llama(str(tmp_path / "old"))
    records = report.read_llama(str(studies / "llama"))
    with pytest.raises(report.ReportError, match="recipe 'fp8' seed 0 appears twice"):
        report.summarize(records + [r for r in records if r["recipe"] == "fp8" and r["seed"] == 0])
    # A run that diverged keeps its NaN: the mean is NaN, not the mean of the others.
    nan = [dict(r, loss=math.nan) if r["recipe"] == "fp8" and r["seed"] == 1 else r for r in records]
    fp8 = next(r for r in report.summarize(nan) if r["row"] == "fp8")
    assert math.isnan(fp8["gap_mean_nats"])
