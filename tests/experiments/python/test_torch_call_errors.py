"""A wrong call into rpsim.torch raises a named exception at that call, naming the argument and what
is allowed, in a line or two, instead of an error from deep inside PyTorch or the bindings (issue
#36): an empty batch, a model returning a tuple, max_grad_norm=-1, a misspelt capture_gemms model,
float targets for RpsimLoss. A float16 or bfloat16 model runs where its dtype holds the policy's
weights (model.half() under fp16-pure, model.bfloat16() under bf16-pure: its forward and gradients
the float32 model's bits) and is refused by name where it does not (fp16-amp's binary32 masters)."""
import copy
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn
F = torch.nn.functional


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 4))


def one_line(e):
    assert len(str(e.value)) < 400 and "\n" not in str(e.value), str(e.value)


def test_an_empty_or_mismatched_batch_is_named():
    t = rt.Trainer(mlp(), "fp16-amp", quiet=True)
    with pytest.raises(ValueError, match=r"Trainer.step: x of shape \(0, 8\) holds no sample") as e:
        t.step(torch.zeros(0, 8), torch.zeros(0, dtype=torch.long))
    one_line(e)
    with pytest.raises(ValueError, match=r"Trainer.step: x holds 4 samples \(shape \(4, 8\)\) but y 3"):
        t.step(torch.zeros(4, 8), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"x holds 2 samples .* but y 8 .*one target per token of x"):
        t.step(torch.zeros(2, 3, 8), torch.zeros(8, dtype=torch.long))  # 2 * 3 tokens, not 8
    with pytest.raises(ValueError, match=r"Trainer.evaluate: y of shape \(0,\) holds no sample"):
        t.evaluate([(torch.zeros(2, 8), torch.zeros(0, dtype=torch.long))])
    assert t.step_index == 0
    t.step(torch.randn(4, 8), torch.zeros(4, dtype=torch.long))  # the Trainer still works


def test_a_model_returning_a_tuple_is_named():
    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            y = self.fc(x)
            return y, y.sum()
    t = rt.Trainer(Pair(), "bf16-amp", quiet=True)
    x, y = torch.randn(4, 8), torch.zeros(4, dtype=torch.long)
    with pytest.raises(TypeError, match=r"Trainer.step: the model returned a tuple of 2, not a tensor; .*"
                                        r"Trainer\(\.\.\., output=0\) picks them") as e:
        t.step(x, y)
    one_line(e)
    with pytest.raises(TypeError, match=r"output: 1.5 is neither a key, an index nor a function"):
        rt.Trainer(Pair(), "bf16-amp", output=1.5)
    with pytest.raises(TypeError, match=r"output=<lambda> picked a str from the model's tuple of 2, not a"):
        t.output = lambda out: "logits"
        t.step(x, y)
    with pytest.raises(ValueError, match=r"Trainer.step: output=2 picks nothing from the model's tuple of 2: "
                                         r"IndexError"):
        t.output = 2
        t.step(x, y)
    t.output = 0
    assert math.isfinite(t.step(x, y))  # the tuple's first: the logits
    assert t.step_index == 1


@pytest.mark.parametrize("value, error, words", [
    (-1, ValueError, r"max_grad_norm: -1 is not a finite number >= 0"),
    (float("nan"), ValueError, r"max_grad_norm: nan is not a finite number >= 0"),
    ("1", TypeError, r"max_grad_norm: '1' is not a number"),
])
def test_max_grad_norm_is_checked(value, error, words):
    with pytest.raises(error, match=words):
        rt.Trainer(mlp(), "fp16-amp", max_grad_norm=value)


def test_total_steps_is_checked():
    with pytest.raises(ValueError, match=r"total_steps: 0 is not a positive number of steps"):
        rt.Trainer(mlp(), "fp32", total_steps=0)


def test_capture_gemms_checks_its_model_at_the_call(tmp_path):
    with pytest.raises(ValueError, match=r"capture_gemms: model: accumulation model 'cublas:h100:fp16:fp23': "
                                         r"format 'fp23'.*unknown format") as e:
        rt.capture_gemms(tmp_path / "cap", model="cublas:h100:fp16:fp23")
    assert not (tmp_path / "cap").exists()  # nothing made: the capture never started
    rt.capture_gemms(tmp_path / "cap", model="cublas:h100:bf16:bf16:rpr=0")
    assert len(str(e.value)) < 600


def test_rpsim_loss_names_float_targets():
    loss = rt.RpsimLoss("mse_loss", "fp32")
    with pytest.raises(TypeError, match=r"RpsimLoss\('mse_loss'\): labels \(shape \(4, 4\) torch.float32\) must be "
                                        r"one class index per row.*torch.nn.functional.mse_loss"):
        loss(torch.randn(4, 4), torch.randn(4, 4))
    with pytest.raises(TypeError, match=r"logits must be a 2-D floating tensor"):
        loss(torch.randn(4), torch.zeros(4, dtype=torch.long))
    assert math.isfinite(float(loss(torch.randn(4, 4), torch.tensor([0, 1, 2, 3]))))


@pytest.mark.parametrize("policy, dtype", [("fp16-pure", torch.float16), ("bf16-pure", torch.bfloat16)])
def test_a_half_or_bfloat16_model_runs_as_its_float32_twin(policy, dtype):
    a = mlp()
    b = copy.deepcopy(a).to(dtype)
    rt.emulate(a, policy)
    rt.emulate(b, policy)
    x = torch.randn(5, 8)
    ya, yb = a(x), b(x)
    assert yb.dtype == torch.float32 and torch.equal(ya, yb)  # the same bits, at least float32
    F.cross_entropy(ya, torch.arange(5) % 4).backward()
    F.cross_entropy(yb, torch.arange(5) % 4).backward()
    for p, q in zip(a.parameters(), b.parameters()):
        assert q.dtype == dtype and q.grad.dtype == dtype
        assert torch.equal(p.grad, q.grad.float())


@pytest.mark.parametrize("policy, dtype, fmt", [("fp16-pure", torch.float16, "binary16"),
                                                ("bf16-pure", torch.bfloat16, "bfloat16")])
def test_a_half_or_bfloat16_model_trains_under_trainer(policy, dtype, fmt):
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16, 3)).to(dtype)
    t = rt.Trainer(model, policy, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), quiet=True)
    x, y = torch.randn(2, 3, 4, 4), torch.tensor([0, 2])
    losses = [t.step(x, y) for _ in range(2)]
    assert all(math.isfinite(v) for v in losses)
    for p in model.parameters():
        v = p.detach().double().numpy()
        assert p.dtype == dtype and np.array_equal(v, rpsim.round(v, fmt))
    bn = model[1]
    assert bn.running_mean.dtype == dtype and bool((bn.running_mean != 0).any())  # its statistics kept


def test_a_half_model_under_a_policy_it_cannot_hold_is_refused_by_name():
    with pytest.raises(ValueError, match=r"policy fp16-amp stores binary32 weights, which a model of torch.float16 "
                                         r"parameters cannot hold: call model.float\(\) first; a float16 model runs "
                                         r"under fp16-pure") as e:
        rt.emulate(mlp().half(), "fp16-amp")
    one_line(e)
    with pytest.raises(ValueError, match=r"policy fp16-pure stores binary16 weights, which a model of "
                                         r"torch.bfloat16 parameters cannot hold"):
        rt.Trainer(mlp().bfloat16(), "fp16-pure")
    m = mlp().half()
    with pytest.raises(ValueError, match="cannot hold"):
        rt.Trainer(m, "bf16-amp")
    rt.emulate(m, "fp16-pure")  # (a refused Trainer leaves the model free)


def test_gradient_accumulation_arguments_are_checked():
    with pytest.raises(ValueError, match=r"gradient_accumulation_steps: 0 is not a number of micro-batches >= 1"):
        rt.Trainer(mlp(), "fp16-amp", gradient_accumulation_steps=0)
    t = rt.Trainer(mlp(), "fp16-amp", gradient_accumulation_steps=3, quiet=True)
    with pytest.raises(ValueError, match=r"a batch of 4 samples does not split into gradient_accumulation_steps=3"):
        t.step(torch.randn(4, 8), torch.zeros(4, dtype=torch.long))
    assert math.isfinite(t.step(torch.randn(6, 8), torch.zeros(6, dtype=torch.long)))
    assert math.isfinite(t.step(torch.randn(4, 8), torch.zeros(4, dtype=torch.long)))  # a short batch: 2 of 2
