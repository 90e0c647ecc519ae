"""Notebooks 03 (underflow), 05 (accuracy) and 07 (transformer) draw a user's own run folders
(RPSIM_RUN, issues #27 and #28): a real rpsim.torch.Trainer run (the LLaMA-style example, fp16-amp,
DeepSpeed's scaler, FP64 shadow, evaluations) and a real rpsim.torch.Telemetry run (the same
example under torch.autocast bf16 on CPU: no shadow, no evaluations). The notebooks' cells are
executed in this process, so that the numbers each panel plots are compared with the run folders'
CSV values, read here independently of notebooks/user_runs.py; the panels a Telemetry run lacks the
data for say so. `rpsim grads` on one step Telemetry dumped gives Telemetry's own fractions and
histogram. Skipped without torch (and the render.sh test without jupyter-nbconvert)."""
import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: no run to draw")
rt = pytest.importorskip("rpsim.torch")
matplotlib = pytest.importorskip("matplotlib", reason="python3-matplotlib is not installed: notebooks not executed")
from test_notebook_figures import execute as run_cells  # noqa: E402  (the notebook runner, same folder)
matplotlib.use("Agg")
NBCONVERT = pathlib.Path(os.environ.get("RPSIM_NBCONVERT", "/usr/bin/jupyter-nbconvert"))
DUMP_STEP = 2


@pytest.fixture(scope="module")
def runs(tmp_path_factory, source_dir):
    """(trainer folder, telemetry folder), each written by a real run of the LLaMA-style example."""
    sys.path.insert(0, str(source_dir / "experiments" / "python" / "examples"))
    import llama_style
    import your_model_run
    base = tmp_path_factory.mktemp("runs")
    trainer = base / "trainer"
    meta = your_model_run.run(str(trainer), steps=6, batch=4, seq=16, histogram_every=2)
    assert meta["shadow"] and meta["steps"] == 6 and len(meta["evaluations"]) >= 1
    telemetry = base / "telemetry"
    torch.manual_seed(0)
    model = llama_style.make_model(dim=16, layers=1, heads=2, hidden=32, max_seq=8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # bf16 autocast needs no loss scale: scale 1, so fp16 would flush some activation gradients.
    with rt.Telemetry(model, out=str(telemetry), sample=None, dump_steps=(DUMP_STEP,)) as tel:
        for x, y in llama_style.fortunes_batches(2, 8, 5):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x).float().flatten(0, 1), y.flatten())
            loss.backward()
            tel.step(loss)
            opt.step()
            opt.zero_grad()
    assert json.loads((telemetry / "meta.json").read_text())["source"] == "rpsim.torch.Telemetry"
    return trainer, telemetry


def execute(source_dir, name, results, folders, monkeypatch):
    """Runs notebook `name`'s code cells on the run folders (test_notebook_figures' runner, cwd
    notebooks/ as Jupyter and render.sh run them) and checks its figure and table were written;
    returns (its namespace, its printed output)."""
    ns, out = run_cells(source_dir, name, results, monkeypatch, runs=folders)
    png = results / "figures" / f"{name}-run.png"
    assert png.stat().st_size > 10000, f"{png} not written"
    assert (results / "figures" / f"{name}-run.md").read_text().startswith("| quantity")
    return ns, out


def steps(folder):
    return pd.read_csv(folder / "steps.csv")


def layer_mean(s, suffix):
    """Per step, the mean over the layers' non-empty `*_suffix` cells (the studies' curves)."""
    cols = [c for c in s.columns if c.endswith("_" + suffix)]
    return np.array([np.nanmean(v) if np.isfinite(v).any() else np.nan for v in s[cols].to_numpy(float)])


def line(ax, label):
    found = [l for l in ax.lines if l.get_label() == label]
    assert len(found) == 1, f"{ax.get_title()}: no single line {label!r} in {[l.get_label() for l in ax.lines]}"
    return found[0]


def texts(ax):
    return " ".join(t.get_text() for t in ax.texts)


def test_notebook_05_draws_a_trainer_and_a_telemetry_run(tmp_path, source_dir, runs, monkeypatch):
    trainer, telemetry = runs
    ns, out = execute(source_dir, "05-accuracy", tmp_path / "results", runs, monkeypatch)
    loss, dist, acc = ns["fig"].axes[:3]
    for folder in runs:
        np.testing.assert_array_equal(line(loss, folder.name).get_ydata(), steps(folder).loss_emulated_nats)
    want = np.clip(layer_mean(steps(trainer), "weight_rel_distance_from_fp64"), 1e-12, None)
    assert np.isfinite(want).all() and (want > 1e-12).any()
    np.testing.assert_allclose(line(dist, "trainer").get_ydata(), want, rtol=1e-12)
    assert [l.get_label() for l in dist.lines] == ["trainer"]  # the Telemetry run has no shadow to draw
    assert "no FP64 shadow in\ntelemetry" in texts(dist) and "no FP64 shadow in telemetry" in out
    evals = pd.read_csv(trainer / "evaluations.csv")
    heights = [p.get_height() for p in acc.patches]
    assert heights[0] == evals.test_accuracy_emulated_percent.iloc[-1] and math.isnan(heights[1])
    np.testing.assert_array_equal(acc.lines[0].get_ydata(), [evals.test_accuracy_fp64_percent.iloc[-1], np.nan])
    assert "no evaluations (evaluations.csv) in\ntelemetry" in texts(acc)
    assert "no fp8.csv: no run folder has FP8 columns" in out


def test_notebook_05_draws_an_rpsim_train_fp8_run(tmp_path, source_dir, runs, run_cli, monkeypatch):
    """A folder of `rpsim train` (mlp-fp8, 6 steps): the FP8 panels plot its <tensor>_fp8_* columns."""
    cli = tmp_path / "mlp-fp8"
    run_cli("train", str(source_dir / "experiments" / "configs" / "mlp-fp8.json"), "--set", "steps=6",
            "--set", "data.test_limit=500", "--out", str(cli), "--quiet")
    ns, out = execute(source_dir, "05-accuracy", tmp_path / "results", [cli, runs[1]], monkeypatch)
    assert (tmp_path / "results" / "figures" / "05-accuracy-run-fp8.png").stat().st_size > 10000
    s = steps(cli)
    tensors = [c[:-len("_fp8_amax")] for c in s.columns if c.endswith("_fp8_amax")]
    assert len(tensors) == 9  # x, w and dy of fc0, fc1, fc2
    amax, scale = ns["fig"].axes[:2]  # the FP8 figure, drawn last
    assert len(amax.lines) == len(tensors)
    for l, t in zip(amax.lines, tensors):
        np.testing.assert_array_equal(l.get_ydata(), s[t + "_fp8_amax"])
    for l, t in zip(scale.lines, tensors):
        np.testing.assert_array_equal(l.get_ydata(), s[t + "_fp8_scale"])
    assert "no FP64 shadow in telemetry" in out and "no FP64 shadow in mlp-fp8" not in out


def test_notebook_07_draws_a_trainer_and_a_telemetry_run(tmp_path, source_dir, runs, monkeypatch):
    trainer, telemetry = runs
    ns, out = execute(source_dir, "07-transformer", tmp_path / "results", runs, monkeypatch)
    val, train, under = ns["fig"].axes[:3]
    evals = pd.read_csv(trainer / "evaluations.csv")
    np.testing.assert_array_equal(line(val, "trainer").get_xdata(), evals.step)
    np.testing.assert_array_equal(line(val, "trainer").get_ydata(), evals.test_loss_emulated_nats)
    dotted = [l for l in val.lines if l.get_linestyle() == ":"]
    assert len(dotted) == 1
    np.testing.assert_array_equal(dotted[0].get_ydata(), evals.test_loss_fp64_nats)
    assert "no evaluations (evaluations.csv) in\ntelemetry" in texts(val) and "no FP64 shadow (no loss_fp64_nats) in telemetry" in out
    for folder in runs:
        s = steps(folder)
        np.testing.assert_array_equal(line(train, folder.name).get_ydata(), s.loss_emulated_nats)
        drawn = [l for l in under.lines if l.get_label().startswith(folder.name)]
        want = layer_mean(s, "activation_grad_underflow_fraction")
        np.testing.assert_allclose(drawn[0].get_ydata(), np.clip(want, 1e-7, None), rtol=1e-12)
    # bf16 autocast at scale 1: fp16 would flush some of the Telemetry run's activation gradients.
    assert (layer_mean(steps(telemetry), "activation_grad_underflow_fraction") > 0).any()


def fig3_fractions(folder, arithmetic):
    """The whole model's activation-gradient histogram at the last histogram step, from the CSV:
    (binades, fraction of all entries, zero fraction)."""
    h = pd.read_csv(folder / "histograms.csv", dtype={"log2_abs_bin": str})
    h = h[(h.arithmetic == arithmetic) & (h.tensor == "activation_grad")]
    h = h[h.step == h.step.max()]
    total = h["count"].sum()
    nz = h[~h.log2_abs_bin.isin(["zero", "nonfinite"])]
    by = nz.groupby(nz.log2_abs_bin.astype(int))["count"].sum().sort_index()
    return by.index.to_numpy(), by.to_numpy() / total, h[h.log2_abs_bin == "zero"]["count"].sum() / total


def test_notebook_03_draws_a_telemetry_and_a_trainer_run(tmp_path, source_dir, runs, monkeypatch):
    trainer, telemetry = runs
    ns, out = execute(source_dir, "03-underflow", tmp_path / "results", [telemetry, trainer], monkeypatch)
    whole, _, scales, trajectory = ns["fig"].axes[:4]
    for folder, arithmetic in ((telemetry, "pytorch"), (trainer, "fp64")):
        e, f, zero = fig3_fractions(folder, arithmetic)
        drawn = [l for l in whole.lines if l.get_label().startswith(folder.name + " ")]
        np.testing.assert_array_equal(drawn[0].get_xdata(), e + 0.5)
        np.testing.assert_allclose(drawn[0].get_ydata(), f, rtol=1e-12)
        assert f"(zero bin {100 * zero:.1f}%)" in drawn[0].get_label()
    assert "telemetry (pytorch)" in ns["fig"]._suptitle.get_text()
    # (c): each run at the loss scale of its first step, its measured mean over layers.
    measured = scales.lines[0]
    first = [steps(f).iloc[[0]] for f in (telemetry, trainer)]
    np.testing.assert_array_equal(measured.get_xdata(), [math.log2(s.loss_scale.iloc[0]) for s in first])
    np.testing.assert_allclose(measured.get_ydata(), [100 * max(layer_mean(s, "activation_grad_underflow_fraction")[0],
                                                                1e-7) for s in first], rtol=1e-12)
    # (d): the first folder's per-layer underflow per step, each layer's column of steps.csv.
    s = steps(telemetry)
    cols = [c for c in s.columns if c.endswith("_activation_grad_underflow_fraction")]
    assert [l.get_label() for l in trajectory.lines] == [c[:-len("_activation_grad_underflow_fraction")] for c in cols]
    for l, c in zip(trajectory.lines, cols):
        np.testing.assert_array_equal(l.get_ydata(), s[c].clip(lower=1e-7))
    assert (s[cols].to_numpy() > 0).any()
    assert "layers with the most fp16-flushed entries" in out
    assert "telemetry: no FP64 shadow: its histograms are its own gradients (pytorch)" in out
    assert "trainer: no FP64 shadow" not in out


def test_rpsim_grads_reads_a_telemetry_step(tmp_path, runs, run_cli):
    """`rpsim grads` on the step Telemetry dumped (every entry: sample=None) gives, at that step's
    loss scale, the fractions steps.csv holds for each tensor and format, and its histogram."""
    _, telemetry = runs
    run_cli("grads", str(telemetry / f"grads_step{DUMP_STEP}.npz"), "--out", str(tmp_path / "g"))
    row = steps(telemetry).set_index("step").loc[DUMP_STEP]
    f = pd.read_csv(tmp_path / "g" / "fractions.csv")
    f = f[f.log2_scale == int(math.log2(row.loss_scale))]
    assert len(f) >= 4 * 10
    for _, r in f.iterrows():
        group, name = r.tensor.split("/", 1)
        key = f"{name}_activation_grad" if group == "act_grad" else f"{name}_grad"
        for c in ("underflow", "subnormal", "overflow"):
            assert row[f"{key}_{r.format}_{c}_fraction"] == r[f"{c}_fraction"], (r.tensor, r.format, c)
    h = pd.read_csv(telemetry / "histograms.csv", dtype={"log2_abs_bin": str})
    h = h[h.step == DUMP_STEP]
    g = pd.read_csv(tmp_path / "g" / "histogram.csv", dtype={"log2_abs_bin": str})
    mine = {(("act_grad/" if r.tensor == "activation_grad" else "param_grad/") + r.layer, r.log2_abs_bin): r.count
            for r in h.itertuples()}
    assert mine == {(r.tensor, r.log2_abs_bin): r.count for r in g.itertuples() if r.count}


def test_render_sh_draws_the_runs(tmp_path, source_dir, runs):
    """render.sh (nbconvert, headless) renders 03, 05 and 07 on RPSIM_RUN, as a user would, and 09
    (one run per notebook) the first folder of the list."""
    if not NBCONVERT.exists():
        pytest.skip(f"{NBCONVERT} absent (apt-get install jupyter-nbconvert): notebooks not rendered")
    env = dict(os.environ, RPSIM_RUN=os.pathsep.join(str(f) for f in runs))
    r = subprocess.run(["bash", str(source_dir / "notebooks" / "render.sh"), str(tmp_path), "03", "05", "07", "09"],
                       capture_output=True, text=True, env=env, timeout=500)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("03-underflow", "05-accuracy", "07-transformer"):
        assert (tmp_path / "figures" / f"{name}-run.png").stat().st_size > 10000
        html = (tmp_path / "figures" / f"{name}-run.html").read_text()
        assert "telemetry: " in html and "<table" in html
    assert not (tmp_path / "figures" / "05-accuracy.html").exists()  # a study's rendering is not overwritten
    html = (tmp_path / "figures" / "09-your-model.html").read_text()
    assert f"RPSIM_RUN names 2 folders: drawing the first, {runs[0]}" in html


def test_a_folder_that_is_not_a_run_is_named(tmp_path, source_dir, monkeypatch):
    monkeypatch.syspath_prepend(str(source_dir / "notebooks"))
    import user_runs
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "steps.csv").write_text("step\n")
    with pytest.raises(user_runs.RunFolderError, match=r"half has no histograms.csv, meta.json"):
        user_runs.load(str(tmp_path / "half"))
    with pytest.raises(user_runs.RunFolderError, match="nowhere is not a folder"):
        user_runs.load(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="'tensor-cores' does not draw run folders"):
        user_runs.tables("tensor-cores", [])


def test_run_tables_are_the_underflow_studys(tmp_path, source_dir, run_cli, monkeypatch):
    """From the histograms of the underflow study's first run, user_runs.py gives the study's own
    predicted.csv, fig3_summary.csv and fig3_histogram.csv (the C++ binned_cast and recovering
    range), value for value: a user's run is drawn by the rule the study's figure uses."""
    monkeypatch.syspath_prepend(str(source_dir / "notebooks"))
    import user_runs
    q = tmp_path / "underflow"
    run_cli("study", "underflow", "--quick", "--out", str(q))
    h = pd.read_csv(q / "histograms.csv", dtype={"log2_abs_bin": str, "loss_scale": str})
    run = user_runs.Run.__new__(user_runs.Run)  # the first run's histograms: the study's "mlp"
    run.label, run.hist = "mlp", h[h.loss_scale == h.loss_scale.iloc[0]].drop(columns="loss_scale")
    exact = dict(float_precision="round_trip")  # the C++ writes 17 digits
    pred = pd.DataFrame(user_runs._predicted(run)).iloc[:, 1:].to_numpy()
    want = pd.read_csv(q / "predicted.csv", **exact).to_numpy()
    assert len(pred) == len(want) >= 25
    assert (pred == want).all()
    hist, summary = [], []
    user_runs._fig3_rows(run, hist, summary)
    for mine, name in ((hist, "fig3_histogram.csv"), (summary, "fig3_summary.csv")):
        want = pd.read_csv(q / name, dtype={"log2_abs_bin": str}, **exact)
        want = want[want.source == "mlp"].to_numpy()
        mine = np.array([r[:1] + r[2:] for r in mine], dtype=object)  # without the arithmetic column
        assert mine.shape == want.shape and len(want) >= 4
        assert (mine == want).all(), name
