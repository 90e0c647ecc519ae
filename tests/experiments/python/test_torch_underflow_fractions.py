"""What rpsim.torch.Trainer's underflow columns are fractions of (issue #36: with a tied output head,
F.linear(x, wte.weight), wte_activation_grad_underflow_fraction was 1.4687: the flushes of the head's
logit gradients, B*T*V entries, divided by the embedding output's B*T*d). Every *_fraction lies in
[0, 1]; <layer>_activation_grad_underflow_fraction counts entries of the gradient at that layer's
output (the tensor its module returns), each at most once, over that gradient's entries; a weight read
by several GEMMs in a step (a tied head, an RNN's recurrent weights, a layer called twice) counts each
flushed gradient entry once over its parameter entries."""
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn
F = torch.nn.functional


class TiedLM(nn.Module):
    """Token embedding, one block, an output head tied to the embedding table (nanoGPT's)."""

    def __init__(self, vocabulary=64, width=4):
        super().__init__()
        self.wte = nn.Embedding(vocabulary, width)
        self.fc = nn.Linear(width, width)

    def forward(self, idx):
        return F.linear(torch.relu(self.fc(self.wte(idx))), self.wte.weight)


class Shared(nn.Module):
    """One layer called twice in a step, its output read by two layers."""

    def __init__(self):
        super().__init__()
        self.fc, self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 3), nn.Linear(6, 3)

    def forward(self, x):
        h = self.fc(self.fc(x))
        return self.a(h) + self.b(h)


def tiny_loss(scale):
    """Cross-entropy times `scale`: gradients small enough that binary16 flushes many of them (a
    sequence model's (B, T, V) flattened here: a loss of the user's gets the output as it is)."""
    return lambda out, y: F.cross_entropy(out.flatten(0, -2), y.flatten()) * scale


def fractions(trainer):
    lines = trainer.steps_csv.splitlines()
    head = lines[0].split(",")
    return [{k: float(v) for k, v in zip(head, line.split(",")) if k.endswith("_fraction") and v != ""}
            for line in lines[1:]]


def all_in_unit_interval(trainer):
    seen = 0
    for row in fractions(trainer):
        for k, v in row.items():
            assert 0.0 <= v <= 1.0, (k, v)
            seen += 1
    return seen


def test_a_tied_head_counts_toward_no_layer_output():
    torch.manual_seed(0)
    model = TiedLM()
    t = rt.Trainer(model, "fp16-amp", loss=tiny_loss(1e-4), scaler="none", quiet=True)
    idx, y = torch.randint(0, 64, (4, 8)), torch.randint(0, 64, (4, 8))
    for _ in range(2):
        t.step(idx, y)
    assert all_in_unit_interval(t) > 0  # (before: wte's activation fraction 1.82 here)
    row = fractions(t)[0]
    # fc's output gradient (B*T*d entries) is the head's input gradient, flushed by its rounding
    # behind the ReLU; wte's is fc's input gradient, flushed by fc's rounding; the head's own output
    # gradient (B*T*V logits, most of them flushed by its cast to binary16) is no layer's output.
    assert 0.0 < row["fc_activation_grad_underflow_fraction"] < 0.1
    assert 0.0 < row["wte_activation_grad_underflow_fraction"] < 0.1
    assert 0.0 < row["wte_weight_grad_underflow_fraction"] < 0.1


def test_shared_layers_and_recurrent_weights_count_each_entry_once():
    torch.manual_seed(1)
    t = rt.Trainer(Shared(), "fp16-amp", loss=tiny_loss(1e-6), scaler="none", quiet=True)
    x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
    for _ in range(2):
        t.step(x, y)
    assert all_in_unit_interval(t) > 0
    assert all(r["fc_weight_grad_underflow_fraction"] > 0 for r in fractions(t))

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.head = nn.LSTM(4, 4, batch_first=True), nn.Linear(4, 3)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])
    torch.manual_seed(2)
    t = rt.Trainer(Recurrent(), "fp16-amp", loss=tiny_loss(1e-6), scaler="none", quiet=True)
    x, y = torch.randn(3, 12, 4), torch.randint(0, 3, (3,))
    for _ in range(2):
        t.step(x, y)
    assert all_in_unit_interval(t) > 0
    # W_hh is read at 12 time steps: its flushed entries counted once each, not once per step
    assert all(0.0 < r["rnn_weight_grad_underflow_fraction"] <= 1.0 for r in fractions(t))


def test_the_activation_fraction_is_of_the_gradient_at_the_layer_output():
    """The flushes counted for a Linear followed by a ReLU and another Linear are the entries of the
    gradient at its output that are zero where the same gradient computed without the second layer's
    input-gradient rounding is not: counted independently here from the two layers' weights."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    t = rt.Trainer(model, "fp16-amp", loss=tiny_loss(1e-5), scaler="none", quiet=True, shadow=False)
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    grads = {}

    def keep(m, a, out):
        grads["h" if m is model[0] else "y"] = out.detach()
        if m is model[2]:
            out.register_hook(lambda g: grads.__setitem__("dy2", g))
    model[0].register_forward_hook(keep)
    model[2].register_forward_hook(keep)
    w2 = model[2].weight.detach().clone()
    t.step(x, y)
    # dx of layer 2 as its rule computes it: dy cast to binary16, times W2 (binary16), in binary64,
    # then rounded to binary16 (exact products, so the order of the sum does not matter for zero
    # vs non-zero: a non-zero binary64 sum of 3 products rounds to zero only below binary16's range).
    dy = grads["dy2"].double()
    dy16 = dy.half().double()
    raw = dy16 @ w2.half().double()
    flushed = (raw != 0) & (raw.half() == 0) & (grads["h"] > 0)  # through the ReLU where its input > 0
    expect = float(flushed.sum()) / grads["h"].numel()
    got = fractions(t)[0]["0_activation_grad_underflow_fraction"]
    assert got == pytest.approx(expect, abs=0) and got > 0


@pytest.mark.parametrize("groups", [1, 4], ids=["dense", "depthwise"])
def test_a_convolutions_input_gradient_flushes_count_at_the_layer_before(groups):
    """A convolution's input gradient (its GEMM's columns summed by col2im in binary64, rounded once to
    binary16) flushes entries of the gradient at the previous layer's output, grouped or not (a
    grouped convolution's were not counted when it ran one GEMM per group): counted independently
    here from the binary16 output gradient and weight."""
    torch.manual_seed(4)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1, groups=groups),
                          nn.Flatten(), nn.Linear(4 * 5 * 5, 3))
    t = rt.Trainer(model, "fp16-amp", loss=tiny_loss(1e-5), scaler="none", quiet=True, shadow=False)
    x, y = torch.randn(6, 2, 5, 5), torch.randint(0, 3, (6,))
    grads = {}

    def keep(m, a, out):
        grads["h"] = out.detach()
        out.register_hook(lambda g: grads.__setitem__("dy", g))
    model[1].register_forward_hook(keep)
    w = model[1].weight.detach().clone()
    t.step(x, y)
    # The input-gradient GEMM's columns (N, C * 3 * 3, L): binary16 dY times the binary16 weight, its
    # exact products summed over the group's output channels, rounded to binary16 (the GEMM's output);
    # col2im sums them in binary64 and rounds once; an entry is flushed where the same sum of the
    # unrounded columns is not zero.
    dy = grads["dy"].half().double().reshape(6, groups, 4 // groups, 25)
    wg = w.half().double().reshape(groups, 4 // groups, -1)
    raw = torch.einsum("gok,ngol->ngkl", wg, dy).reshape(6, -1, 25)
    dx = F.fold(raw.half().double(), (5, 5), 3, padding=1).half()
    flushed = (F.fold(raw, (5, 5), 3, padding=1) != 0) & (dx == 0)
    got = fractions(t)[0]["0_activation_grad_underflow_fraction"]
    assert got == pytest.approx(float(flushed.sum()) / flushed.numel(), abs=0) and got > 0
