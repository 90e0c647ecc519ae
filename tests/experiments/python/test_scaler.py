"""rpsim.scaler_trajectory: a hand-worked PyTorch trajectory, every policy equal to `rpsim scaler`
on the same events, and the errors a user sees."""
import numpy as np
import pytest
import rpsim


def test_pytorch_trajectory_by_hand():
    # GradScaler: growth after growth_interval clean steps in a row, backoff (x0.5) and a skipped
    # step on an overflow, which also resets the count.
    t = rpsim.scaler_trajectory([0, 0, 1, 0, 0, 0], "pytorch", init_scale=1024.0, growth_interval=2)
    assert t["step"].tolist() == [1, 2, 3, 4, 5, 6]
    assert t["scale"].tolist() == [1024.0, 1024.0, 2048.0, 1024.0, 1024.0, 2048.0]
    assert t["skipped"].tolist() == [False, False, True, False, False, False]
    assert t["stopped"] is None and t["policy"] == "pytorch"
    assert t["scale"].dtype == np.float64 and t["skipped"].dtype == np.bool_


def test_deepspeed_hysteresis_and_raise_at_min_scale():
    # delayed_shift 2: the first overflow only spends the hysteresis, the second halves the scale.
    t = rpsim.scaler_trajectory(np.array([1, 1, 0]), "deepspeed", init_scale=8.0, hysteresis=2,
                                growth_interval=1000)
    assert t["scale"].tolist() == [8.0, 8.0, 4.0] and t["skipped"].tolist() == [True, True, False]
    stop = rpsim.scaler_trajectory([1, 1, 1], "deepspeed", init_scale=2.0, hysteresis=1, min_scale=1.0,
                                   raise_at_min_scale=True)
    assert stop["stopped"] is not None and len(stop["step"]) < 3


@pytest.mark.parametrize("policy", ["none", "static", "pytorch", "deepspeed", "megatron", "apex", "keras", "tf2"])
def test_every_policy_equals_the_cli(policy, run_cli, tmp_path):
    rng = np.random.default_rng(11)
    events = (rng.random(3000) < 0.01).astype(np.int8)
    events[1500:1503] = 1  # a burst: hysteresis and backoff in a row
    params = {"init_scale": 4096.0} if policy == "static" else {}
    t = rpsim.scaler_trajectory(events, policy, **params)
    path = tmp_path / "events.txt"
    path.write_text("".join(f"{e}\n" for e in events))
    args = ["scaler", "--policy", policy, "--events", str(path)]
    if policy == "static":
        args += ["--init-scale", "4096"]
    lines = run_cli(*args).stdout.splitlines()
    assert lines[0] == "step,scale,skipped"
    rows = [line.split(",") for line in lines[1:]]
    assert [int(r[0]) for r in rows] == t["step"].tolist()
    assert [float(r[1]) for r in rows] == t["scale"].tolist()
    assert [r[2] == "1" for r in rows] == t["skipped"].tolist()


def test_bool_events_and_an_empty_sequence():
    a = rpsim.scaler_trajectory([False, True, False], "pytorch")
    b = rpsim.scaler_trajectory([0, 1, 0], "pytorch")
    assert a["scale"].tolist() == b["scale"].tolist()
    assert rpsim.scaler_trajectory([], "pytorch")["step"].shape == (0,)


@pytest.mark.parametrize("call, error, names", [
    (lambda: rpsim.scaler_trajectory([0], "pytorh"), ValueError, "pytorh"),
    (lambda: rpsim.scaler_trajectory([0], "pytorch", growth_intervall=3), ValueError, "growth_intervall"),
    (lambda: rpsim.scaler_trajectory([0], "pytorch", hysteresis=2), ValueError, "hysteresis"),
    (lambda: rpsim.scaler_trajectory([0], "pytorch", growth_interval=2.5), ValueError, "growth_interval"),
    (lambda: rpsim.scaler_trajectory([0], "pytorch", growth_factor=0.5), ValueError, "growth_factor"),
    (lambda: rpsim.scaler_trajectory([0], "pytorch", init_scale="big"), TypeError, "init_scale"),
    (lambda: rpsim.scaler_trajectory([0], "deepspeed", consecutive_hysteresis=1), TypeError, "consecutive"),
    (lambda: rpsim.scaler_trajectory([0, 2], "pytorch"), ValueError, r"events\[1\] = 2"),
    (lambda: rpsim.scaler_trajectory([0.0, 1.0], "pytorch"), TypeError, "float64"),
    (lambda: rpsim.scaler_trajectory([[0, 1]], "pytorch"), ValueError, "one-dimensional"),
])
def test_bad_input_raises_naming_it(call, error, names):
    with pytest.raises(error, match=names):
        call()
