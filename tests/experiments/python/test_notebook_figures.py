"""The notebooks on what a user brings (issue #36), without PyTorch: run folders of `rpsim train`.
render.sh reads RPSIM_RUN's folders from the folder it is called in (they were read from
notebooks/); notebook 05 draws a run with more FP8 tensors than tab10 has colours, and block-scaled
(MX, NVFP4) runs, whose scales are a range per tensor; notebook 04 shows both of two scalers whose
trajectories coincide; notebook 06 reads a sweep whose grid has a `steps` key. The notebooks' cells
are executed in this process (cwd notebooks/, as render.sh runs them) and the figures' data compared
with the CSV files."""
import contextlib
import io
import json
import os
import pathlib
import subprocess

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="python3-matplotlib is not installed: notebooks not executed")
matplotlib.use("Agg")
NBCONVERT = pathlib.Path(os.environ.get("RPSIM_NBCONVERT", "/usr/bin/jupyter-nbconvert"))
SYNTHETIC = '{"name": "synthetic", "synthetic_train_size": 256, "synthetic_test_size": 64}'


def train(run_cli, source_dir, out, policy, hidden="[16, 16, 16]", steps=4):
    run_cli("train", str(source_dir / "experiments" / "configs" / "mlp-fp8.json"), "--set", f"policy={policy}",
            "--set", f"steps={steps}", "--set", f"model.hidden={hidden}", "--set", f"data={SYNTHETIC}",
            "--set", "telemetry.histogram_steps=[0, 2]", "--out", str(out), "--quiet")
    return out


def execute(source_dir, name, results, monkeypatch, runs=None, **env):
    """Runs notebook `name`'s code cells here (cwd notebooks/); returns (namespace, printed output)."""
    monkeypatch.setenv("RPSIM_RESULTS", str(results))
    if runs is None:
        monkeypatch.delenv("RPSIM_RUN", raising=False)
    else:
        monkeypatch.setenv("RPSIM_RUN", os.pathsep.join(str(f) for f in runs))
    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    monkeypatch.chdir(source_dir / "notebooks")
    import matplotlib.pyplot as plt
    plt.close("all")
    nb = json.loads((source_dir / "notebooks" / f"{name}.ipynb").read_text())
    ns, out = {"display": print}, io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, c in enumerate(nb["cells"]):
            if c["cell_type"] == "code":
                exec(compile("".join(c["source"]), f"{name}[{i}]", "exec"), ns)
    return ns, out.getvalue()


@pytest.fixture(scope="module")
def fp8_runs(tmp_path_factory, source_dir, run_cli):
    """Run folders of an MLP with 4 linear layers under fp8 (12 FP8 tensors), mxfp8 and nvfp4."""
    base = tmp_path_factory.mktemp("fp8-runs")
    return [train(run_cli, source_dir, base / p, p) for p in ("fp8", "mxfp8", "nvfp4")]


def fp8_figure(source_dir, tmp_path, monkeypatch, runs):
    """Notebook 05 on `runs`: the amax and scale panels of its FP8 figure, checked line by line
    against each run's steps.csv; returns (namespace, scale panel, lines drawn)."""
    ns, out = execute(source_dir, "05-accuracy", tmp_path / "results", monkeypatch, runs)
    assert (tmp_path / "results" / "figures" / "05-accuracy-run-fp8.png").stat().st_size > 10000
    assert "no fp8.csv" not in out
    amax, scale = ns["fig"].axes[:2]  # the FP8 figure, drawn last
    drawn = 0
    for folder in runs:
        s = pd.read_csv(folder / "steps.csv")
        tensors = [c[:-len("_fp8_amax")] for c in s.columns if c.endswith("_fp8_amax")]
        assert len(tensors) >= 9
        for t, line in zip(tensors, amax.lines[drawn:drawn + len(tensors)]):
            np.testing.assert_array_equal(line.get_ydata(), s[t + "_fp8_amax"])
        for t, line in zip(tensors, scale.lines[drawn:drawn + len(tensors)]):
            want = s[t + "_fp8_scale_max"] if folder.name != "fp8" else s[t + "_fp8_scale"]
            np.testing.assert_array_equal(line.get_ydata(), want)
        drawn += len(tensors)
    assert len(amax.lines) == drawn
    return ns, scale, drawn


def test_notebook_05_gives_each_of_12_fp8_tensors_its_own_colour(tmp_path, source_dir, fp8_runs, monkeypatch):
    """Tensors were zipped with tab10's 10 colours: KeyError on the 11th."""
    _, scale, drawn = fp8_figure(source_dir, tmp_path, monkeypatch, fp8_runs[:1])
    assert drawn == 12 and len({matplotlib.colors.to_hex(l.get_color()) for l in scale.lines}) == 12


def test_notebook_05_draws_block_scaled_runs(tmp_path, source_dir, fp8_runs, monkeypatch):
    """mxfp8 and nvfp4 runs have <t>_fp8_scale_min/_max instead of <t>_fp8_scale (KeyError): their
    scale panel draws the largest block scale, shaded down to the smallest, one band per tensor."""
    ns, scale, drawn = fp8_figure(source_dir, tmp_path, monkeypatch, fp8_runs)
    assert len(scale.collections) == drawn - 12
    assert "block-scaled: largest block scale" in scale.get_title()
    assert ("scale_min", "min") in ns["summary_fp8"].columns


def test_render_sh_reads_rpsim_run_from_the_callers_folder(tmp_path, source_dir, run_cli):
    """As the README says: `RPSIM_RUN=results/your-model notebooks/render.sh results 05` from the
    folder holding results/ (it looked for notebooks/results/your-model: RunFolderError)."""
    if not NBCONVERT.exists():
        pytest.skip(f"{NBCONVERT} absent (apt-get install jupyter-nbconvert): notebooks not rendered")
    train(run_cli, source_dir, tmp_path / "results" / "mine", "fp8", hidden="[16]")
    env = dict(os.environ, RPSIM_RUN="results/mine")
    r = subprocess.run(["bash", str(source_dir / "notebooks" / "render.sh"), "results", "05"], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=500)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "results" / "figures" / "05-accuracy-run.png").stat().st_size > 10000
    assert str(tmp_path / "results" / "mine") in (tmp_path / "results" / "figures" / "05-accuracy-run.html").read_text()


def test_a_relative_run_folder_that_is_missing_says_where_it_was_read_from(tmp_path, source_dir, monkeypatch):
    monkeypatch.syspath_prepend(str(source_dir / "notebooks"))
    monkeypatch.chdir(tmp_path)
    import user_runs
    with pytest.raises(user_runs.RunFolderError, match=f"results/x read from {tmp_path}: give an absolute path"):
        user_runs.load("results/x")


def test_notebook_04_shows_both_of_two_coinciding_scalers(tmp_path, source_dir, run_cli, monkeypatch):
    """PyTorch's and Apex's scalers move identically: the second is drawn dashed over the first and
    its legend entry says so (one line hid the other)."""
    config = json.loads((source_dir / "experiments" / "configs" / "study-loss-scale.json").read_text())
    config["quick"]["scalers"] = [{"policy": "pytorch", "growth_interval": 3}, {"policy": "deepspeed"},
                                  {"policy": "apex", "growth_interval": 3}]
    config["quick"]["train_set"] += [f"data={SYNTHETIC}", "data.train_limit=0", "data.test_limit=0"]
    (tmp_path / "study-loss-scale.json").write_text(json.dumps(config))
    run_cli("study", "loss-scale", "--quick", "--config", str(tmp_path / "study-loss-scale.json"),
            "--out", str(tmp_path / "results" / "loss-scale"))
    trace = pd.read_csv(tmp_path / "results" / "loss-scale" / "scale_trace.csv")
    by = {name: g for name, g in trace.groupby("scaler")}
    np.testing.assert_array_equal(by["apex"].loss_scale, by["pytorch"].loss_scale)  # the case in question
    ns, out = execute(source_dir, "04-loss-scale", tmp_path / "results", monkeypatch)
    ax = ns["fig"].axes[0]
    labels = [l.get_label() for l in ax.lines if not l.get_label().startswith("_")]
    assert labels == ["pytorch", "deepspeed", "apex (= pytorch, dashed)"]
    apex = next(l for l in ax.lines if l.get_label().startswith("apex"))
    pytorch = next(l for l in ax.lines if l.get_label() == "pytorch")
    assert apex.get_linestyle() == "--" and pytorch.get_linestyle() == "-"
    np.testing.assert_array_equal(apex.get_ydata(), pytorch.get_ydata())
    assert "apex: the same loss scale and skipped steps as pytorch at every step" in out


def test_notebook_06_reads_a_sweep_over_steps(tmp_path, source_dir, run_cli, monkeypatch):
    """A grid with a `steps` key: summary.csv's results column is result.steps (the header had
    `steps` twice) and notebook 06 takes the grid's keys up to it."""
    sweep = {"name": "over-steps", "base": {"seed": 0, "policy": "fp32", "model": {"type": "mlp", "hidden": [4]},
                                           "data": json.loads(SYNTHETIC), "optimizer": {"type": "sgd", "lr": 0.05},
                                           "batch_size": 16},
             "grid": {"steps": [1, 3], "seed": [0, 1]}}
    (tmp_path / "sweep.json").write_text(json.dumps(sweep))
    run_cli("sweep", str(tmp_path / "sweep.json"), "--out", str(tmp_path / "sweep"))
    summary = pd.read_csv(tmp_path / "sweep" / "summary.csv")
    assert list(summary.columns[:4]) == ["run_id", "steps", "seed", "result.steps"]
    assert list(summary["result.steps"]) == list(summary["steps"])
    ns, _ = execute(source_dir, "06-sweep", tmp_path / "results", monkeypatch, RPSIM_SWEEP=tmp_path / "sweep")
    assert ns["keys"] == ["steps", "seed"]
    assert (tmp_path / "results" / "figures" / "06-sweep.png").exists()
