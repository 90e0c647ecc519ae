"""rpsim.train: the same run as `rpsim train` (the same steps.csv values), as a DataFrame or a
dict of arrays, with its metadata; bad keys raise ValueError naming them."""
import json

import numpy as np
import pytest
import rpsim

SMALL = {
    "name": "py-small", "seed": 1, "policy": "fp16-amp",
    "model": {"type": "mlp", "hidden": [16]},
    "data": {"name": "synthetic", "synthetic_train_size": 256, "synthetic_test_size": 64},
    "optimizer": {"type": "sgd", "lr": 0.1},
    "batch_size": 64, "steps": 4,
}


def csv_columns(text):
    lines = text.splitlines()
    header, rows = lines[0].split(","), [line.split(",") for line in lines[1:]]
    return {h: [r[j] for r in rows] for j, h in enumerate(header)}


def same(array, cells):
    want = np.array([float(c) if c else np.nan for c in cells])
    return np.array_equal(np.asarray(array, dtype=np.float64), want, equal_nan=True)


def test_dict_config_equals_the_cli_run(run_cli, tmp_path):
    cfg = tmp_path / "small.json"
    cfg.write_text(json.dumps(SMALL))
    run_cli("train", str(cfg), "--quiet", "--set", "steps=3", "--set", "optimizer.lr=0.05",
            "--out", str(tmp_path / "cli"))
    cli = csv_columns((tmp_path / "cli" / "steps.csv").read_text())
    r = rpsim.train(SMALL, steps=3, optimizer__lr=0.05, as_frame=False)
    assert list(r.steps) == list(cli)
    for name, cells in cli.items():
        assert same(r.steps[name], cells), name
    assert r.steps["step"].dtype == np.int64 and len(r.steps["step"]) == 3
    meta = json.loads((tmp_path / "cli" / "meta.json").read_text())
    assert r.meta["steps"] == meta["steps"] == 3
    assert r.meta["loss_scaler"] == meta["loss_scaler"] and r.meta["policy"] == meta["policy"]
    # The histograms too (string columns stay strings).
    hist = csv_columns((tmp_path / "cli" / "histograms.csv").read_text())
    assert list(r.histograms) == list(hist)


def test_a_config_file_with_overrides_and_out(tmp_path):
    cfg = tmp_path / "small.json"
    cfg.write_text(json.dumps(SMALL))
    r = rpsim.train(cfg, out=tmp_path / "py", as_frame=False, **{"loss_scaler.init_scale": 512.0})
    assert r.steps["loss_scale"][0] == 512.0
    written = csv_columns((tmp_path / "py" / "steps.csv").read_text())
    assert same(r.steps["loss_emulated_nats"], written["loss_emulated_nats"])
    assert (tmp_path / "py" / "meta.json").exists()
    assert "py-small" in repr(r)


def test_dataframe_when_pandas_is_there():
    pandas = pytest.importorskip("pandas", reason="Debian's python3-pandas is not installed")
    r = rpsim.train(SMALL, steps=2, shadow=False, evaluate=False)
    assert isinstance(r.steps, pandas.DataFrame) and len(r.steps) == 2
    assert r.steps["loss_fp64_nats"].isna().all()  # no shadow: empty cells
    assert len(r.evaluations) == 0 and "test_accuracy_emulated_percent" in r.evaluations.columns


@pytest.mark.parametrize("call, error, names", [
    (lambda: rpsim.train({**SMALL, "optimiser": {}}), ValueError, "optimiser"),
    (lambda: rpsim.train(SMALL, optimizer__lrr=0.1), ValueError, "lrr"),
    (lambda: rpsim.train(SMALL, policy="fp17-amp"), ValueError, "fp17"),
    (lambda: rpsim.train(SMALL, batch_size=0), ValueError, "batch_size"),
    (lambda: rpsim.train("/nonexistent/config.json"), ValueError, "/nonexistent/config.json"),
    (lambda: rpsim.train(42), TypeError, "int"),
    (lambda: rpsim.train(SMALL, threads=-1), ValueError, "threads"),
    (lambda: rpsim.train({**SMALL, "seed": "one"}), ValueError, r'seed: expected an integer, got "one"'),
    (lambda: rpsim.train({**SMALL, "extends": 3}), ValueError, "extends: expected a config file name"),
])
def test_bad_input_raises_naming_it(call, error, names):
    with pytest.raises(error, match=names):
        call()


def test_extends_in_a_file_and_in_a_dict(tmp_path):
    # The config layer's one "extends" (config_file.hpp): a file names its base relative to itself,
    # a dict relative to the working folder (an absolute name here).
    (tmp_path / "base.json").write_text(json.dumps(SMALL))
    (tmp_path / "variant.json").write_text(json.dumps({"extends": "base.json", "steps": 2}))
    r = rpsim.train(tmp_path / "variant.json", as_frame=False)
    assert len(r.steps["step"]) == 2 and r.meta["name"] == "variant"
    d = rpsim.train({"extends": str(tmp_path / "base.json"), "steps": 1}, as_frame=False)
    assert len(d.steps["step"]) == 1 and r.meta["policy"] == d.meta["policy"]


def test_ctrl_c_stops_the_run_at_a_step_boundary():
    # SIGINT while the run holds no GIL: Python's handler runs, the trainer's flag is set, the run
    # stops, and KeyboardInterrupt reaches the caller within a step or two.
    import os, signal, threading, time  # noqa: E401
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    try:
        t0 = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            rpsim.train(SMALL, steps=10_000_000, shadow=False, evaluate=False)
        assert time.monotonic() - t0 < 60
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert len(rpsim.train(SMALL, steps=1, as_frame=False).steps["step"]) == 1  # the flag was cleared
