"""How rpsim.torch.Trainer hands the model's output to the loss (rpsim/torch/_loss_layout.py): a loss
the user wrote gets the output as their own loop gives it, a (B, T, V) sequence output or a namedtuple
with auxiliary heads; rpsim's own cross-entropy flattens (B, T, V); a loss that fails on either says
what to do."""
import collections
import copy
import math

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")
from test_torch_trainer_models import check_fractions, deadline, rows, two_steps  # noqa: E402  (same folder)

nn = torch.nn
F = torch.nn.functional


class TokenTagger(nn.Module):
    def __init__(self, vocab=11, width=8):
        super().__init__()
        self.emb, self.head = nn.Embedding(vocab, width), nn.Linear(width, vocab)

    def forward(self, idx):
        return self.head(torch.tanh(self.emb(idx)))  # (B, T, V)


def test_a_loss_of_the_users_gets_the_models_output_as_it_is():
    # Trainer flattened a (B, T, V) output to (B * T, V) before any loss: a loss written for the
    # model's own output, here PyTorch's (B, V, T) layout by a transpose, failed with IndexError.
    # rpsim's default cross-entropy still flattens; both see the same numbers.
    ids = torch.randint(0, 11, (3, 5), generator=torch.Generator().manual_seed(2))
    y = torch.roll(ids, 1, dims=1)
    runs = []
    for loss in (None, lambda out, y: F.cross_entropy(out.transpose(1, 2), y)):
        torch.manual_seed(3)
        t = rt.Trainer(TokenTagger(), "bf16-amp", loss=loss, quiet=True)
        with deadline(300):
            runs.append([t.step(ids, y) for _ in range(2)] + [t.evaluate([(ids, y)])["test_loss_nats"]])
        check_fractions(t)
    assert runs[0] == runs[1]
    # A loss written for (N, C) logits fails on the (B, T, V) output with PyTorch's error, and says how to
    # flatten it.
    t = rt.Trainer(TokenTagger(), "bf16-amp", loss=F.cross_entropy, quiet=True)
    with pytest.raises(RuntimeError, match=r"(?s)Expected target size.*your loss got the model's output \(3, 5, 11\) "
                                           r"as it is, against y \(3, 5\); flatten them in the loss"):
        t.step(ids, y)


class AuxHeads(nn.Module):
    """googlenet's pattern: logits and an auxiliary head's in training (a namedtuple), logits in eval."""
    Outputs = collections.namedtuple("Outputs", "logits aux_logits")

    def __init__(self):
        super().__init__()
        self.body, self.head, self.aux = nn.Linear(8, 16), nn.Linear(16, 3), nn.Linear(16, 3)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.Outputs(self.head(h), self.aux(h)) if self.training else self.head(h)


def aux_loss(out, y):
    if isinstance(out, AuxHeads.Outputs):
        return F.cross_entropy(out.logits, y) + 0.4 * F.cross_entropy(out.aux_logits, y)
    return F.cross_entropy(out, y)


def test_a_loss_of_the_users_takes_a_model_output_that_is_no_tensor():
    # Trainer demanded a tensor of logits (output= to pick one), so a loss adding an auxiliary head's
    # cross-entropy (torchvision's googlenet and inception_v3 in training) could not be written.
    torch.manual_seed(6)
    model = AuxHeads()
    reference = copy.deepcopy(model).double()
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 0])
    t = two_steps(model, x, y, "bf16-amp", loss=aux_loss)
    with torch.no_grad():
        expected = float(aux_loss(reference(x.double()), y))
    assert float(rows(t)[0]["loss_fp64_nats"]) == pytest.approx(expected, rel=1e-12)
    assert all(math.isfinite(v) for v in t.evaluate([(x, y)]).values())
    t = rt.Trainer(AuxHeads(), "bf16-amp", loss=F.cross_entropy, quiet=True)
    with pytest.raises(TypeError, match=r"(?s)cross_entropy_loss.*your loss got the model's output Outputs as it "
                                        r"is, against y \(4,\); Trainer\(..., output=0\)"):
        t.step(x, y)


class TimeMajor(nn.Module):
    """nn.GRU's default layout: (T, N, F) in, CTC's log-probabilities (T, N, C) out."""

    def __init__(self):
        super().__init__()
        self.rnn, self.head = nn.GRU(8, 16), nn.Linear(16, 5)

    def forward(self, x):
        return F.log_softmax(self.head(self.rnn(x)[0]), -1)


def test_a_time_major_model_with_its_own_loss_trains_and_evaluates():
    # x (T, N, F) against CTC targets y (N, S) was refused as a batch of mismatched halves; a loss of
    # yours reads the batch as your model lays it out. Accuracy there has no argmax layout: nan.
    # Gradient accumulation splits along dimension 0, so it still refuses the pair, naming the fix.
    ctc = nn.CTCLoss()

    def loss(out, y):
        return ctc(out, y, torch.full((out.shape[1],), out.shape[0]), torch.full((y.shape[0],), y.shape[1]))
    torch.manual_seed(0)
    x, y = torch.randn(10, 2, 8), torch.randint(1, 5, (2, 4))
    model = TimeMajor()
    trainer = rt.Trainer(model, "fp16-amp", lambda p: torch.optim.SGD(p, lr=0.1), loss=loss, histogram_steps=())
    losses = [trainer.step(x, y) for _ in range(3)]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    result = trainer.evaluate([(x, y)])
    assert math.isfinite(result["test_loss_nats"]) and math.isnan(result["test_accuracy_percent"])
    assert math.isfinite(result["shadow_test_loss_nats"])
    accumulating = rt.Trainer(TimeMajor(), "fp16-amp", lambda p: torch.optim.SGD(p, lr=0.1), loss=loss,
                              histogram_steps=(), gradient_accumulation_steps=2)
    with pytest.raises(ValueError, match=r"x holds 10 samples .* but y 2 .*without gradient accumulation"):
        accumulating.step(x, y)
