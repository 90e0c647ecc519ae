"""In-place ops under emulation (rpsim/torch/_inplace.py): an in-place op whose backward reads its own
result (x.sigmoid_(), x.exp_(), ...) trains with the bits of its out-of-place twin; before, rounding the
result in place moved the tensor's version past autograd's saved result and the step stopped. relu_
under a wide format (the fp64 policy, the FP64 shadow) leaves its result alone: it had been copied onto
itself, with the same failure. A functional op's inplace=True (F.silu(y, inplace=True), its return value
dropped) trains with the bits of F.silu(y)."""
import copy
import functools

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn
F = torch.nn.functional

OPS = {"sigmoid": lambda y: y.sigmoid(), "sigmoid_": lambda y: y.sigmoid_(),
       "tanh": lambda y: torch.tanh(y), "tanh_": lambda y: torch.tanh_(y),
       "exp": lambda y: y.mul(0.1).exp(), "exp_": lambda y: y.mul_(0.1).exp_(),
       "sqrt": lambda y: y.abs().add(1).sqrt(), "sqrt_": lambda y: y.abs_().add_(1).sqrt_()}
# A functional op's inplace=True, its return value dropped (the tensor is read after it).
FUNCTIONAL = {"silu": lambda y, i: F.silu(y, inplace=i), "elu": lambda y, i: F.elu(y, 0.7, inplace=i),
              "hardswish": lambda y, i: F.hardswish(y, inplace=i),
              "leaky_relu": lambda y, i: F.leaky_relu(y, 0.1, inplace=i),
              "dropout": lambda y, i: F.dropout(y, 0.3, True, inplace=i)}
OPS.update({name + tail: functools.partial(f, i=tail == "_") for name, f in FUNCTIONAL.items() for tail in ("", "_")})


class Net(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.a, self.h, self.op = nn.Linear(8, 16), nn.Linear(16, 4), op

    def forward(self, x):
        y = self.a(x) + 0  # not a leaf's view: the op may change it in place
        z = OPS[self.op](y)
        return self.h(y if self.op.endswith("_") else z)  # the in-place twin is read through y itself


def _step(model, policy, dtype):
    t = rt.Trainer(model, policy, quiet=True, shadow=False)
    torch.manual_seed(2)  # the twins' dropout masks alike
    loss = t.step(torch.randn(6, 8, generator=torch.Generator().manual_seed(1)).to(dtype), torch.arange(6) % 4)
    return loss, [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("policy,dtype", [("fp16-amp", torch.float32), ("fp16-pure", torch.float16),
                                          ("bf16-pure", torch.bfloat16), ("fp64", torch.float64)])
@pytest.mark.parametrize("op", ["sigmoid", "tanh", "exp", "sqrt"])
def test_result_saving_in_place_ops_train_as_their_twins(policy, dtype, op):
    _check_twins(op, dtype, policy)


@pytest.mark.parametrize("policy,dtype", [("fp16-amp", torch.float32), ("fp16-pure", torch.float16),
                                          ("bf16-pure", torch.bfloat16)])
@pytest.mark.parametrize("op", sorted(FUNCTIONAL))
def test_a_functional_ops_inplace_true_rounds_the_tensor_it_changes(policy, dtype, op):
    # F.silu(y, inplace=True) with its return value dropped left y holding the unrounded binary32 result
    # (the rounded one was a new tensor nobody read); y now holds what F.silu(y) returns.
    _check_twins(op, dtype, policy)


def _check_twins(op, dtype, policy):
    torch.manual_seed(0)
    base = Net(op).to(dtype)
    twin = copy.deepcopy(base)
    twin.op = op + "_"
    want, want_params = _step(base, policy, dtype)
    got, got_params = _step(twin, policy, dtype)
    assert got == want
    assert all(torch.equal(a, b) for a, b in zip(got_params, want_params))


class ViewsThenRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.h = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        y = self.a(x)
        y[:, :4] += 1.0
        y.relu_()
        return self.h(y)


def test_relu_in_place_trains_under_a_wide_format_and_the_shadow():
    torch.manual_seed(0)
    x, y = torch.randn(4, 8), torch.arange(4) % 4
    t = rt.Trainer(ViewsThenRelu().double(), "fp64", quiet=True)
    for _ in range(2):
        t.step(x.double(), y)
    rows = [r.split(",") for r in t.steps_csv.splitlines()[1:]]
    assert len(rows) == 2 and all(r[2] == r[3] for r in rows)  # the fp64 policy's loss is its shadow's
    t = rt.Trainer(ViewsThenRelu(), "fp16-amp", quiet=True)  # the shadow runs it in float64
    for _ in range(2):
        t.step(x, y)
    rows = [r.split(",") for r in t.steps_csv.splitlines()[1:]]
    assert len(rows) == 2 and all(abs(float(r[2]) - float(r[3])) < 1e-2 for r in rows)


def test_each_result_saving_row_is_an_in_place_method_with_an_out_of_place_twin():
    from rpsim.torch._tables import RESULT_SAVING  # the C++ torch-name table's result_saving rows
    assert {"sigmoid_", "exp_"} <= RESULT_SAVING
    for name in RESULT_SAVING:
        assert name.endswith("_") and callable(getattr(torch.Tensor, name)) and callable(getattr(torch.Tensor, name[:-1]))
