"""The FP64 shadow of rpsim.torch.Trainer (rpsim/torch/_shadow.py, and the shadow's side of
_trainer.py's step and evaluate): a user's model and loss as they are written run against it.
- A loss that makes its own float32 targets meets the float64 output as float64, and so does a
  forward that makes its own float32 tensors (affine_grid's theta, a mask).
- A model whose pre-hook keeps a computed weight (nn.utils.weight_norm) is copied.
- Dropout draws the emulated model's masks.
- Each shadow module runs in its model module's train/eval mode, and evaluate() leaves each module's
  mode as it found it; a parameter frozen or a checkpoint loaded after Trainer() is so in the shadow."""
import copy
import math

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")
from test_torch_trainer_models import deadline, rows, two_steps  # noqa: E402  (the Trainer helpers, same folder)

nn = torch.nn
F = torch.nn.functional


def _one_hot_mse(out, y):
    return F.mse_loss(out, F.one_hot(y, out.shape[-1]).float())


def _filled_huber(out, y):
    target = torch.zeros(out.shape)  # float32, filled in place (left in place by the shadow's loss)
    target[torch.arange(len(y)), y] = 1.0
    return F.huber_loss(out, target, delta=0.5)


@pytest.mark.parametrize("loss", [_one_hot_mse, _filled_huber])
def test_a_loss_that_makes_float32_targets_trains_against_the_shadow(loss):
    """A loss written for a float32 model makes its targets in float32. Against the shadow's float64
    output, PyTorch 1.13's mse_loss/huber_loss backward refused the pair ("Found dtype Float but
    expected Double") and the step stopped; the shadow's loss now takes them to float64."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    reference = copy.deepcopy(model).double()
    x, y = torch.randn(4, 8), torch.arange(4) % 4
    t = two_steps(model, x, y, "fp16-amp", loss=loss)
    # Step 0's shadow loss is the loss in float64 from the same weights, its target exact in float64.
    with torch.no_grad():
        out = reference(x.double())
        target = F.one_hot(y, 4).double()
        expected = F.mse_loss(out, target) if loss is _one_hot_mse else F.huber_loss(out, target, delta=0.5)
    assert float(rows(t)[0]["loss_fp64_nats"]) == pytest.approx(float(expected), rel=1e-12)
    assert all(p.grad is not None and p.grad.dtype == torch.float64 for p in t.shadow_model.parameters())
    e = t.evaluate([(x, y)])
    assert math.isfinite(e["test_loss_nats"])


@pytest.mark.parametrize("accumulation", [1, 2])
def test_dropout_draws_the_same_masks_in_the_shadow(accumulation):
    """The shadow's dropout masks are the emulated model's: under the fp64 policy the two losses are
    the same number (different masks had put them 3% apart, which the distance from FP64 then
    measured), and the generator leaves each step where a run without the shadow leaves it."""
    def run(shadow):
        torch.manual_seed(4)
        model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 4)).double()
        x, y = torch.randn(32, 16, dtype=torch.float64), torch.arange(32) % 4
        t = rt.Trainer(model, "fp64", quiet=True, shadow=shadow, gradient_accumulation_steps=accumulation)
        with deadline(300):
            losses = [t.step(x, y) for _ in range(3)]
        return t, losses, torch.get_rng_state()
    t, losses, state = run(True)
    for r in rows(t):
        assert r["loss_emulated_nats"] == r["loss_fp64_nats"]
    _, alone, alone_state = run(False)
    assert losses == alone and torch.equal(state, alone_state)
    # A dropout left on in eval (Monte Carlo dropout): the same masks in evaluate too.
    t = rt.Trainer(McDropout().double(), "fp64", quiet=True)
    e = t.evaluate([(torch.randn(8, 16, dtype=torch.float64), torch.arange(8) % 4)])
    assert e["test_loss_nats"] == e["shadow_test_loss_nats"]


@pytest.mark.parametrize("policy", ["fp64", "fp16-amp"])
def test_weight_norm_trains_against_the_shadow(policy):
    """nn.utils.weight_norm keeps the computed weight as a non-leaf attribute, which copy.deepcopy
    refuses: Trainer(...) stopped before the first step. The shadow's copy now gets it detached and
    its pre-hook makes it again from the float64 g and v: under the fp64 policy both losses agree."""
    torch.manual_seed(5)
    model = nn.Sequential(nn.utils.weight_norm(nn.Linear(8, 16)), nn.ReLU(), nn.Linear(16, 4))
    dtype = torch.float64 if policy == "fp64" else torch.float32
    x, y = torch.randn(6, 8, dtype=dtype), torch.arange(6) % 4
    t = two_steps(model.to(dtype), x, y, policy)
    assert t.shadow_model[0].weight.dtype == torch.float64
    assert model[0].weight.dtype == dtype and model[0].weight.grad_fn is not None  # the original's as it was
    for r in rows(t):
        if policy == "fp64":
            assert r["loss_emulated_nats"] == r["loss_fp64_nats"]
        else:
            assert abs(float(r["loss_emulated_nats"]) - float(r["loss_fp64_nats"])) < 1e-2


class McDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return F.dropout(self.fc(x), 0.5, training=True)


class IdentityWarp(nn.Module):
    """grid_sample on a grid from a theta the forward makes in float32 (torch.eye), then a float32 mask."""

    def __init__(self):
        super().__init__()
        self.conv, self.head = nn.Conv2d(3, 4, 3, padding=1), nn.Linear(4, 3)

    def forward(self, x):
        y = self.conv(x)
        theta = torch.eye(2, 3).expand(x.shape[0], 2, 3)
        y = F.grid_sample(y, F.affine_grid(theta, list(y.shape), align_corners=False), align_corners=False)
        return self.head((y * torch.ones(y.shape[-1])).mean((2, 3)))


@pytest.mark.parametrize("policy", ["fp16-amp", "fp64"])
def test_a_forward_that_makes_float32_tensors_trains_against_the_shadow(policy):
    # The shadow's float64 activations met the float32 theta's grid in grid_sample, and the step stopped
    # ("expected scalar type Double but found Float"); under the fp64 policy a model.double() did too.
    torch.manual_seed(4)
    model = IdentityWarp().double() if policy == "fp64" else IdentityWarp()
    x, y = torch.randn(2, 3, 6, 6), torch.tensor([0, 2])
    t = two_steps(model, x, y, policy)
    if policy == "fp64":  # the same binary64 arithmetic in both: the same losses
        assert [r["loss_emulated_nats"] for r in rows(t)] == [r["loss_fp64_nats"] for r in rows(t)]


def test_the_shadow_follows_each_modules_mode_and_evaluate_keeps_them():
    # A BatchNorm frozen with eval() and a dropout turned off after Trainer() made the shadow ran in
    # train mode in the shadow (step 0's losses 1.090 against 1.008 under fp16-amp), and evaluate()'s
    # model.train(True) put them back in train mode.
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3)).double()
    t = rt.Trainer(model, "fp64", quiet=True)
    model[1].eval(), model[3].eval()
    modes = [m.training for m in model.modules()]
    x, y = torch.randn(6, 8), torch.arange(6) % 3
    for _ in range(2):
        t.step(x, y)
        t.evaluate([(x, y)])
        assert [m.training for m in model.modules()] == modes == [m.training for m in t.shadow_model.modules()]
    # The same binary64 arithmetic in both (the fp64 policy): the same losses, running statistics kept
    assert [r["loss_emulated_nats"] for r in rows(t)] == [r["loss_fp64_nats"] for r in rows(t)]
    assert torch.equal(model[1].running_mean, torch.zeros(8, dtype=torch.float64))


@pytest.mark.parametrize("policy", ["fp64", "bf16-pure"])
def test_a_checkpoint_loaded_and_a_layer_frozen_after_trainer_reach_the_shadow(policy):
    # The shadow kept the weights Trainer() copied (step 0's losses 2.147 against 0.942 after a
    # checkpoint), trained a layer the model had frozen since, and kept its first learning rate.
    torch.manual_seed(8)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
    model = model.double() if policy == "fp64" else model
    checkpoint = {k: v * 3 + 0.01 for k, v in model.state_dict().items()}
    t = rt.Trainer(model, policy, quiet=True)
    model.load_state_dict(checkpoint)
    model[0].weight.requires_grad_(False)
    x, y = torch.randn(6, 8), torch.arange(6) % 3
    for lr in (0.05, 0.2):  # a warmup by hand on the model's optimizer (the shadow's kept lr 0.1)
        t.optimizer.param_groups[0]["lr"] = lr
        t.step(x, y)
    assert t.shadow_optimizer.param_groups[0]["lr"] == 0.2
    frozen = t.shadow_model[0].weight
    assert not frozen.requires_grad and torch.equal(frozen, checkpoint["0.weight"].double())
    if policy == "fp64":  # the same binary64 arithmetic: the same losses
        assert [r["loss_emulated_nats"] for r in rows(t)] == [r["loss_fp64_nats"] for r in rows(t)]
    else:  # the checkpoint's binary32 weights stored as the policy's bfloat16 ones, as Trainer() stores them
        w = checkpoint["0.weight"]
        assert not torch.equal(w, w.bfloat16().float())
        assert torch.equal(model[0].weight, w.bfloat16().float())


class Noisy(nn.Module):
    """A VAE's reparameterisation and an augmentation: noise drawn inside the forward, dominating it."""

    def __init__(self):
        super().__init__()
        self.a, self.h = nn.Linear(8, 8), nn.Linear(8, 3)

    def forward(self, x):
        z = self.a(x)
        z = z + 10 * torch.randn_like(z) + torch.empty_like(z).normal_() + torch.rand_like(z)
        return self.h(z)


def test_noise_drawn_inside_the_forward_is_the_same_in_the_shadow():
    # randn_like on the shadow's float64 tensors drew other numbers from the same generator state than on
    # the model's float32 ones (step 0's losses 18.5 against 19.8 for a small VAE under fp16-amp).
    torch.manual_seed(9)
    t = two_steps(Noisy(), torch.randn(6, 8), torch.arange(6) % 3, "fp32")
    for r in rows(t):  # binary32 against binary64 arithmetic on the same noise
        assert float(r["loss_fp64_nats"]) == pytest.approx(float(r["loss_emulated_nats"]), rel=1e-5)
