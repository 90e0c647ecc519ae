"""Notebook 09 (your model) renders on a short run of experiments/python/examples/your_model_run.py
(rpsim.torch.Trainer: LLaMA-style, fp16-amp, DeepSpeed's scaler, FP64 shadow) and, through
RPSIM_RUN, on a folder rpsim.torch.Telemetry wrote (issue #27). Skipped without torch or
/usr/bin/jupyter-nbconvert."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: notebook 09 has no run to draw")
rt = pytest.importorskip("rpsim.torch")
NBCONVERT = pathlib.Path(os.environ.get("RPSIM_NBCONVERT", "/usr/bin/jupyter-nbconvert"))


@pytest.fixture(scope="module")
def examples(source_dir):
    sys.path.insert(0, str(source_dir / "experiments" / "python" / "examples"))
    import llama_style
    import your_model_run
    return llama_style, your_model_run


def render(source_dir, results, run=None):
    if not NBCONVERT.exists():
        pytest.skip(f"{NBCONVERT} absent (apt-get install jupyter-nbconvert): notebook 09 not executed")
    env = dict(os.environ)
    env.pop("RPSIM_RUN", None)
    if run is not None:
        env["RPSIM_RUN"] = str(run)
    r = subprocess.run(["bash", str(source_dir / "notebooks" / "render.sh"), str(results), "09"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    figures = results / "figures"
    assert (figures / "09-your-model.png").stat().st_size > 10000
    assert "<table" in (figures / "09-your-model.html").read_text()
    return (figures / "09-your-model.md").read_text()


def test_notebook_09_draws_a_trainer_run(tmp_path, source_dir, examples):
    _, your_model_run = examples
    run = tmp_path / "results" / "your-model"
    meta = your_model_run.run(str(run), steps=4, batch=4, seq=16, histogram_every=2)
    assert meta["steps"] == 4 and meta["loss_scaler"]["policy"] == "deepspeed" and meta["shadow"]
    assert meta["policy"]["name"] == "fp16-amp"
    assert sorted(p.name for p in run.iterdir()) == ["evaluations.csv", "histograms.csv", "meta.json", "steps.csv"]
    # The scaler starts at 2^20: the first step overflows (skipped), as the notebook's panel (c) shows.
    table = render(source_dir, tmp_path / "results")
    assert f"| steps recorded / skipped (overflow) | 4 / {meta['skipped_steps']} |" in table
    assert meta["skipped_steps"] >= 1
    assert "(fp64, step 0)" in table and "emulated / FP64 shadow" in table
    assert "largest final weight distance from FP64" in table


def test_notebook_09_draws_a_telemetry_run(tmp_path, source_dir, examples):
    llama_style, _ = examples
    model = llama_style.make_model(dim=16, layers=1, heads=2, hidden=32, max_seq=8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = rt.GradScaler("deepspeed")
    tel_dir = tmp_path / "telemetry"
    with rt.Telemetry(model, out=str(tel_dir), scaler=scaler) as tel:
        for x, y in llama_style.fortunes_batches(2, 8, 3):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x).float().flatten(0, 1), y.flatten())
            scaler.scale(loss).backward()
            tel.step(loss)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    assert json.loads((tel_dir / "meta.json").read_text())["source"] == "rpsim.torch.Telemetry"
    table = render(source_dir, tmp_path / "results", run=tel_dir)
    assert "| steps recorded / skipped (overflow) | 3 / 0 |" in table
    assert "(pytorch, step 0)" in table and "FP64 shadow" not in table
