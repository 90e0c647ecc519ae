"""The ResNet-style and LLaMA-style examples (models `rpsim train` cannot express) train a few
steps through rpsim.torch.Trainer under each policy, and write rpsim train's files (issue #27)."""
import json
import math
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "experiments" / "python" / "examples"
sys.path.insert(0, str(EXAMPLES))
import llama_style  # noqa: E402
import resnet_style  # noqa: E402

# (policy, scaler): fp16-amp with DeepSpeed's scaler and without any.
POLICIES = [("fp32", None), ("fp16-amp", "deepspeed"), ("fp16-amp", "none"), ("bf16-amp", None),
            ("bf16-pure", None), ("fp8-delayed", None), ("fp8-current", None)]


def models():
    return {
        "resnet": (lambda: resnet_style.make_model(width=4), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
                   resnet_style.fashion_mnist_batches(8, 2)),
        "llama": (lambda: llama_style.make_model(dim=32, layers=1, heads=2, hidden=64, max_seq=16),
                  lambda p: torch.optim.AdamW(p, lr=1e-3), llama_style.fortunes_batches(4, 16, 2)),
    }


@pytest.fixture(scope="module")
def cli_columns():
    """steps.csv's columns from `rpsim train` itself (one step of the shipped MLP)."""
    r = rpsim.train({"name": "t", "seed": 0, "policy": "fp32", "model": {"type": "mlp", "hidden": [8]},
                     "data": {"name": "synthetic", "synthetic_train_size": 64, "synthetic_test_size": 16},
                     "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 16, "steps": 1, "shadow": True},
                    as_frame=False)
    return list(r.steps)


@pytest.mark.parametrize("name", ["resnet", "llama"])
@pytest.mark.parametrize("policy, scaler", POLICIES)
def test_trains_under_policy(tmp_path, name, policy, scaler, cli_columns):
    make, opt, batches = models()[name]
    t = rt.Trainer(make(), policy, opt, scaler=scaler, out=tmp_path)
    t.run(batches)
    e = t.evaluate(batches[:1])
    meta = t.finish()
    assert meta["steps"] == 2 and meta["policy"]["name"] == policy
    assert math.isfinite(e["test_loss_nats"]) and math.isfinite(e["shadow_test_loss_nats"])
    if scaler:
        assert meta["loss_scaler"]["policy"] == scaler
    cols = (tmp_path / "steps.csv").read_text().splitlines()[0].split(",")
    # The CLI's head columns, then the CLI's eight columns per layer with parameters.
    assert cols[:8] == cli_columns[:8]
    suffixes = [c.split("_", 1)[1] for c in cli_columns[8:16]]
    first_layer = t.layers[0][0]
    assert cols[8:16] == [f"{first_layer}_{s}" for s in suffixes]
    # FP8 policies: amax, scale, saturated and flushed fractions of x, w, dy per FP8 GEMM layer, after.
    assert len(cols) == 8 + 8 * len(t.layers) + 12 * len(t.fp8_layers)
    assert bool(t.fp8_layers) == policy.startswith("fp8")
    rows = (tmp_path / "steps.csv").read_text().splitlines()[1:]
    assert len(rows) == 2 and all(len(r.split(",")) == len(cols) for r in rows)
    assert math.isfinite(float(rows[-1].split(",")[2]))
    hist = (tmp_path / "histograms.csv").read_text().splitlines()
    assert hist[0] == "step,layer,tensor,arithmetic,log2_abs_bin,count"
    assert any(",emulated," in h for h in hist) and any(",fp64," in h for h in hist)
    ev = (tmp_path / "evaluations.csv").read_text().splitlines()
    assert ev[0].startswith("step,epoch,test_loss_emulated_nats,test_loss_fp64_nats")
    assert json.loads((tmp_path / "meta.json").read_text())["shadow"] is True
    if policy != "fp32":
        # the emulation took effect: the run differs from its FP64 shadow
        dist = [c for c in cols if c.endswith("_weight_rel_distance_from_fp64")]
        assert any(float(rows[-1].split(",")[cols.index(c)]) > 0 for c in dist)


@pytest.mark.parametrize("name", ["resnet", "llama"])
def test_trains_under_fp64_as_its_fp64_shadow(name):
    # fp64 on the model made float64 (as train_your_model.py does for a policy storing binary64 weights): every
    # GEMM, LayerNorm and softmax on rpsim's binary64 kernels, the rest in PyTorch's float64. The shadow runs the
    # same policy, so the two runs agree to the bit: equal losses, weights at distance 0 from the shadow's.
    make, opt, batches = models()[name]
    model = make()
    assert rt.policy("fp64")["weights"] == "binary64"
    with pytest.raises(ValueError, match=r"model\.double\(\)"):
        rt.Trainer(model, "fp64", opt)
    t = rt.Trainer(model.double(), "fp64", opt)
    t.run(batches)
    cols = t.steps_csv.splitlines()[0].split(",")
    rows = [r.split(",") for r in t.steps_csv.splitlines()[1:]]
    assert len(rows) == 2 and t.dtype == torch.float64
    dist = [cols.index(c) for c in cols if c.endswith("_weight_rel_distance_from_fp64")]
    for r in rows:
        assert r[2] == r[3] and float(r[2]) > 0  # loss_emulated_nats == loss_fp64_nats
        assert dist and all(r[i] == "0" for i in dist)


def test_the_example_script_runs_fp64_on_a_float64_model(tmp_path, capsys):
    import train_your_model
    t = train_your_model.main(["--model", "llama", "--policy", "fp64", "--steps", "1", "--batch", "2",
                               "--out", str(tmp_path)])
    assert all(p.dtype == torch.float64 for p in t.model.parameters())
    assert json.loads((tmp_path / "meta.json").read_text())["policy"]["name"] == "fp64"
    assert "llama fp64: 1 steps" in capsys.readouterr().out


def test_ctrl_c_stops_at_a_step_boundary(tmp_path):
    import os
    import signal
    make, opt, batches = models()["resnet"]
    calls = []

    def loss(out, y):  # Ctrl-C arrives during the second step
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return torch.nn.functional.cross_entropy(out, y)
    t = rt.Trainer(make(), "fp16-amp", opt, loss, shadow=False, out=tmp_path)
    t.run(batches * 3)
    meta = t.finish()
    assert meta["partial"] is True and meta["steps"] == 2
    assert len((tmp_path / "steps.csv").read_text().splitlines()) == 3


def test_import_without_torch_names_the_package():
    import subprocess
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import rpsim.torch\nexcept ImportError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ})
    assert "python3-torch" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("args, names", [
    (["--policy", "nope"], "unknown policy \"nope\""),
    (["--scaler", "nope"], "unknown loss scaler policy 'nope'"),
    (["--steps", "0"], "0 must be at least 1"),
    (["--batch", "-3"], "-3 must be at least 1"),
])
def test_train_your_model_bad_arguments_exit_2_with_a_message(args, names, capsys):
    """A newcomer's typo in the example's options: the message and status 2, not a traceback."""
    import train_your_model
    with pytest.raises(SystemExit) as e:
        train_your_model.main(["--steps", "1", "--batch", "2"] + args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert names in err and "Traceback" not in err
