"""rpsim.torch.GradScaler: torch.cuda.amp.GradScaler's API, step-identical to rpsim.scaler_trajectory
(the same C++ scaler table as `rpsim scaler`) (issue #27)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")

EVENTS = [0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]
CASES = [("deepspeed", {"init_scale": 2.0 ** 10, "growth_interval": 3, "hysteresis": 2}),
         ("pytorch", {"init_scale": 2.0 ** 12, "growth_interval": 4}),
         ("megatron", {"init_scale": 2.0 ** 8, "growth_interval": 2, "hysteresis": 2}),
         ("apex", {}), ("keras", {"growth_interval": 5}), ("static", {"init_scale": 128.0})]


def run_loop(scaler, events):
    """A real PyTorch loop: an overflow injected into a gradient where events says so."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scales, skipped = [], []
    for e in events:
        opt.zero_grad()
        scales.append(scaler.get_scale())
        loss = model(torch.ones(3, 4)).pow(2).mean()
        scaler.scale(loss).backward()
        if e:
            model.weight.grad[0, 0] = math.inf
        before = model.weight.detach().clone()
        scaler.step(opt)
        skipped.append(bool(torch.equal(before, model.weight.detach())))
        scaler.update()
    return scales, skipped


@pytest.mark.parametrize("policy, params", CASES)
def test_step_identical_to_the_scaler_table(policy, params):
    ref = rpsim.scaler_trajectory(EVENTS, policy, **params)
    scales, skipped = run_loop(rt.GradScaler(policy, **params), EVENTS)
    assert scales == list(ref["scale"])
    assert skipped == list(ref["skipped"])


def test_unscale_multiplies_by_the_binary32_reciprocal_and_finds_overflow():
    s = rt.GradScaler("pytorch", init_scale=3.0)
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([p], lr=1.0)
    s.scale(p.sum()).backward()
    assert p.grad.tolist() == [3.0] * 3
    s.unscale_(opt)
    inv = float(np.float32(1 / 3.0))
    assert p.grad.tolist() == [float(np.float32(3.0 * inv))] * 3
    assert not s.found_inf()
    with pytest.raises(RuntimeError, match="already"):
        s.unscale_(opt)


def test_state_dict_round_trip_replays_the_counters():
    a = rt.GradScaler("deepspeed", init_scale=2.0 ** 10, growth_interval=3, hysteresis=2)
    run_loop(a, EVENTS[:11])
    b = rt.GradScaler("deepspeed")
    b.load_state_dict(a.state_dict())
    assert b.get_scale() == a.get_scale() and b.state() == a.state()
    assert run_loop(a, EVENTS[11:]) == run_loop(b, EVENTS[11:])


def test_bad_input_names_it():
    with pytest.raises(ValueError, match="tensorflow3"):
        rt.GradScaler("tensorflow3")
    with pytest.raises(ValueError, match="growth_intervall"):
        rt.GradScaler("deepspeed", growth_intervall=3)
    with pytest.raises(ValueError, match="events"):
        rt.GradScaler().load_state_dict({"policy": "deepspeed", "params": {}})


def test_an_alias_is_its_rows_scaler():
    # "dynamic" (configs' and policy rows' name for PyTorch's) is an alias in the C++ scaler table.
    d, p = rt.GradScaler("dynamic"), rt.GradScaler("pytorch")
    assert d.policy == "pytorch" and d.get_scale() == p.get_scale()


def test_trainer_refuses_the_per_layer_adaptive_scaler():
    # rpsim train multiplies each layer's incoming gradient inside backward (its steps.csv has
    # <layer>_loss_scale); a GradScaler only scales the loss, so a Trainer would silently run a static scaler.
    assert rt.GradScaler("adaptive")._scaler.per_layer
    assert not rt.GradScaler("pytorch")._scaler.per_layer
    for scaler in ("adaptive", rt.GradScaler("adaptive", init_scale=2.0 ** 10)):
        with pytest.raises(ValueError, match="'adaptive'.*rpsim train"):
            rt.Trainer(torch.nn.Linear(4, 2), "fp16-amp", lambda p: rt.SGD(p, lr=0.1), scaler=scaler,
                       shadow=False)
    rt.Trainer(torch.nn.Linear(4, 2), "fp16-amp", lambda p: rt.SGD(p, lr=0.1), scaler="pytorch", shadow=False)
