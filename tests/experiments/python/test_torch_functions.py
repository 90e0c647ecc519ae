"""A custom autograd Function in an emulated model (rpsim.torch._functions): its backward, which
autograd runs after the emulation's mode has ended, runs under the emulation that built its node, so
its ops take the paths they take in a forward; outside an emulation the same Function runs as PyTorch
runs it. (It was refused by name: a gradient-reversal layer or a straight-through estimator, common in
users' models, could not be emulated at all.)"""
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")
from torch import nn  # noqa: E402

SEEN = []  # what LinearFunction.backward saw and returned, per call


class LinearFunction(torch.autograd.Function):
    """The hand-written linear of PyTorch's "Extending PyTorch" note."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x.mm(w.t())

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        dx, dw = g.mm(w), g.t().mm(x)
        SEEN.append((g.clone(), w.clone(), dx))
        return dx, dw


class GradReverse(torch.autograd.Function):
    """Ganin & Lempitsky 2015's gradient reversal: the identity forward, -g backward."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return -g


class Net(nn.Module):
    def __init__(self, middle):
        super().__init__()
        torch.manual_seed(0)
        self.fc, self.w, self.head, self.middle = nn.Linear(8, 16), nn.Parameter(torch.randn(16, 16)), \
            nn.Linear(16, 4), middle

    def forward(self, x):
        h = torch.relu(self.fc(x))
        return self.head(self.middle(h, self.w))


def hand_linear(h, w):
    return LinearFunction.apply(h, w)


def test_a_custom_functions_backward_runs_under_the_emulation():
    SEEN.clear()
    model = Net(hand_linear)
    torch.manual_seed(1)
    x = torch.randn(5, 8)
    em = rt.emulate(model, "bf16-pure")
    model(x).square().sum().backward()
    assert "function backward: " + __name__ + ".LinearFunction x1" in em.summary()
    (g, w, dx), = SEEN
    # The backward's mm is the emulation's (its result carries the emulation's format mark), the same
    # bits as that mm called under the emulation's mode, and not PyTorch's float32 mm.
    assert getattr(dx, "_rpsim_format", None) == "bfloat16"
    with em:
        assert torch.equal(dx, g.mm(w))
    assert not torch.equal(dx, g.float().mm(w.float()))
    # The same Function in a model not emulated: PyTorch's arithmetic.
    SEEN.clear()
    em.remove()
    model(x).square().sum().backward()
    (g, w, dx), = SEEN
    assert getattr(dx, "_rpsim_format", None) is None and torch.equal(dx, g.mm(w))


def test_a_gradient_reversal_negates_the_gradients_before_it_under_trainer():
    # A negation is exact: the layers before the reversal get exactly the negated gradients of the
    # same model without it, the layers after it the same ones, through Trainer and its FP64 shadow.
    torch.manual_seed(2)
    x, y = torch.randn(6, 8), torch.arange(6) % 4
    grads = {}
    for name, middle in (("plain", lambda h, w: h @ w), ("reversed", lambda h, w: GradReverse.apply(h) @ w)):
        model = Net(middle)
        trainer = rt.Trainer(model, "fp16-amp", lambda p: torch.optim.SGD(p, lr=0.0), histogram_steps=())
        trainer.step(x, y)
        grads[name] = {n: p.grad.clone() for n, p in model.named_parameters()}
        if name == "reversed":
            assert "function backward: " + __name__ + ".GradReverse x1" in trainer.emulation.summary()
    for n, g in grads["plain"].items():
        expected = -g if n.startswith("fc.") else g
        assert torch.equal(grads["reversed"][n], expected), n
    assert grads["plain"]["fc.weight"].abs().sum() > 0
