"""rpsim.torch.Trainer on the models users bring (issue #36): an in-place ReLU (nn.ReLU(inplace=True),
F.relu(..., inplace=True): the first step never finished), frozen parameters (emulate and Trainer
crashed), a regression loss (float targets were not cast for the FP64 shadow), nn.MultiheadAttention
and nn.LSTM / nn.GRU (refused before; now emulated), and torchvision's ResNet-18 as it ships. Each
trains 2 steps under Trainer with the FP64 shadow, and every fraction column it writes lies in
[0, 1]. A step that hangs fails after a deadline instead of hanging CI."""
import contextlib
import copy
import math
import signal

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn
F = torch.nn.functional


@contextlib.contextmanager
def deadline(seconds):
    """TimeoutError if the block runs longer (SIGALRM: the hang was a Python loop, which a signal
    interrupts between bytecodes)."""
    def fire(*_):
        raise TimeoutError(f"still running after {seconds} s: a hang")
    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def rows(trainer):
    lines = trainer.steps_csv.splitlines()
    head = lines[0].split(",")
    return [dict(zip(head, line.split(","))) for line in lines[1:]]


def check_fractions(trainer):
    """Every *_fraction cell is empty (nothing to measure) or a number in [0, 1]."""
    seen = 0
    for row in rows(trainer):
        for key, cell in row.items():
            if key.endswith("_fraction") and cell != "":
                assert 0.0 <= float(cell) <= 1.0, (key, cell)
                seen += 1
    assert seen > 0


def two_steps(model, x, y, policy="fp16-amp", **kw):
    t = rt.Trainer(model, policy, quiet=True, **kw)
    with deadline(300):
        losses = [t.step(x, y) for _ in range(2)]
    assert all(math.isfinite(v) for v in losses)
    assert t.shadow_model is not None
    assert all(r["loss_fp64_nats"] not in ("", "nan") for r in rows(t))
    check_fractions(t)
    return t


class FunctionalInPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x), inplace=True))


@pytest.mark.parametrize("make", [
    lambda: nn.Sequential(nn.Linear(8, 8), nn.ReLU(inplace=True), nn.Linear(8, 4)),
    FunctionalInPlace,
])
def test_an_in_place_relu_trains_and_gives_the_out_of_place_bits(make):
    torch.manual_seed(0)
    model = make()
    plain = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
    plain.load_state_dict({k.replace("fc1", "0").replace("fc2", "2"): v for k, v in model.state_dict().items()})
    x, y = torch.randn(4, 8) * 1e-3, torch.randint(0, 4, (4,))
    a = two_steps(model, x, y)
    b = two_steps(plain, x, y)
    # The in-place ReLU is the same op: the same losses, weights and telemetry, the flushes behind the
    # ReLU counted for fc1 as rpsim's Tensor::flushed passes them (fp16-amp, tiny inputs, scale 2^16).
    assert [list(r.values()) for r in rows(a)] == [list(r.values()) for r in rows(b)]
    for p, q in zip(model.parameters(), plain.parameters()):
        assert torch.equal(p, q)


def test_frozen_parameters_train_stored_in_the_policy_format():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))
    for p in model[0].parameters():
        p.requires_grad_(False)  # the first layer frozen, as fine-tuning does
    model[2].weight.requires_grad_(False)  # and one weight of a layer whose bias trains
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    t = two_steps(model, x, y, "bf16-pure")
    for n, p in model.named_parameters():
        v = p.detach().double().numpy()
        assert np.array_equal(v, rpsim.round(v, "bfloat16")), n  # every weight stored in bfloat16
        if n in frozen:  # ... and a frozen one only rounded, never stepped
            assert torch.equal(p, torch.from_numpy(rpsim.round(frozen[n].double().numpy(), "bfloat16")).float())
    assert [p.requires_grad for p in t.shadow_model.parameters()] == [p.requires_grad for p in model.parameters()]
    assert all(torch.equal(p, frozen[n].double()) for n, p in t.shadow_model.named_parameters() if n in frozen)
    for r in rows(t):
        # layer 0 has nothing that trains: its weight-gradient columns are empty, not 0
        for c in ("weight_grad_underflow", "weight_grad_nonfinite", "weight_grad_zero_vs_fp64",
                  "weight_update_stalled"):
            assert r[f"0_{c}_fraction"] == "", c
        assert r["0_weight_rel_distance_from_fp64"] != ""
        assert r["2_weight_grad_underflow_fraction"] != ""  # its bias trains
    # emulate alone, and a parameter unfrozen later gets its gradient rounded from then on
    m = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 4))
    m[0].weight.requires_grad_(False)
    rt.emulate(m, "fp16-pure")
    m[0].weight.requires_grad_(True)
    m(torch.randn(3, 8)).sum().backward()
    g = m[0].weight.grad.double().numpy()
    assert np.array_equal(g, rpsim.round(g, "binary16"))


def test_a_regression_loss_trains_against_the_shadow():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    t = two_steps(model, x, y, "bf16-amp", loss=F.mse_loss)
    r = rows(t)[0]
    assert abs(float(r["loss_emulated_nats"]) - float(r["loss_fp64_nats"])) < 0.05
    e = t.evaluate([(x, y)])
    assert math.isfinite(e["test_loss_nats"]) and math.isnan(e["test_accuracy_percent"])


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        y, _ = self.attn(x, x, x, need_weights=False)
        return self.head(y)


class Recurrent(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn, self.head = rnn, nn.Linear(rnn.hidden_size * (2 if rnn.bidirectional else 1), 5)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


@pytest.mark.parametrize("make", [
    Attention,
    lambda: Recurrent(nn.LSTM(8, 6, num_layers=2, batch_first=True)),
    lambda: Recurrent(nn.GRU(8, 6, batch_first=True, bidirectional=True)),
], ids=["multihead_attention", "lstm", "gru"])
def test_attention_and_recurrent_modules_train(make):
    torch.manual_seed(3)
    model = make()
    t = two_steps(model, torch.randn(2, 5, 8), torch.randint(0, 5, (2, 5)))
    summary = t.emulation.summary()
    assert "decomposed: " in summary and "rpsim kernel: linear" in summary
    first = next(iter(dict(model.named_children())))  # attn, rnn: its output is the tuple's first item
    for r in rows(t):
        for layer in (first, "head"):
            assert r[f"{layer}_activation_grad_nonfinite_fraction"] == "0", layer
            assert r[f"{layer}_weight_grad_nonfinite_fraction"] == "0", layer


def test_torchvision_resnet18_trains_as_it_ships():
    torchvision = pytest.importorskip("torchvision", reason="python3-torchvision is not installed")
    torch.manual_seed(4)
    model = torchvision.models.resnet18(num_classes=3)
    assert any(isinstance(m, nn.ReLU) and m.inplace for m in model.modules())
    t = two_steps(model, torch.randn(2, 3, 32, 32), torch.randint(0, 3, (2,)))
    kernel, binary32, layout = t.emulation.summary().splitlines()[1:4]
    assert "conv2d x40" in kernel and "linear x2" in kernel  # 20 convolutions a step, the fc layer
    assert "batch_norm x40" in binary32 and "relu x" in layout


# Torchvision's other families as they ship, each under a different policy: concatenated branches
# (squeezenet's fire modules, googlenet's inception blocks with ceil_mode pooling), channel shuffle
# with chunk and depthwise convolutions (shufflenet), squeeze-and-excitation with grouped
# convolutions (regnet), shifted-window attention with roll, permute and LayerNorm (swin).
ZOO = [("squeezenet1_0", "fp16-amp", {}), ("shufflenet_v2_x0_5", "bf16-amp", {}),
       ("googlenet", "mxfp8", {"aux_logits": False, "init_weights": False}), ("regnet_y_400mf", "nvfp4", {}),
       ("swin_t", "fp8", {})]


@pytest.mark.parametrize("name,policy,kw", ZOO, ids=[z[0] for z in ZOO])
def test_torchvision_families_train_as_they_ship(name, policy, kw):
    torchvision = pytest.importorskip("torchvision", reason="python3-torchvision is not installed")
    make = getattr(torchvision.models, name, None)
    if make is None:
        pytest.skip(f"torchvision {torchvision.__version__} has no {name}")
    torch.manual_seed(5)
    model = make(num_classes=3, **kw)
    t = two_steps(model, torch.rand(2, 3, 64, 64), torch.randint(0, 3, (2,)), policy)
    kernel = t.emulation.summary().splitlines()[1]
    assert "rpsim kernel: " in kernel and ("conv2d x" in kernel or "linear x" in kernel), kernel
    for r in rows(t):
        assert r["loss_emulated_nats"] not in ("", "nan", "inf", "-inf")


class Segmenter(nn.Module):
    """A small U-Net-style net: per-pixel logits (N, C, H, W), PyTorch's layout for class targets
    (N, H, W), the class dimension second."""

    def __init__(self):
        super().__init__()
        self.down, self.mid = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.out = nn.Conv2d(16, 3, 1)

    def forward(self, x):
        a = F.relu(self.down(x))
        b = F.relu(self.mid(F.max_pool2d(a, 2)))
        return self.out(torch.cat([a, self.up(b)], 1))


def test_a_segmentation_net_trains_with_the_class_dimension_second():
    # Trainer flattened every output of more than 2 dimensions with the class dimension last (a GPT's
    # (B, T, V)); a segmentation net's (N, C, H, W) then failed in cross_entropy ("input batch_size
    # (64) to match target batch_size (512)").
    torch.manual_seed(5)
    model = Segmenter()
    x, y = torch.randn(2, 3, 8, 8), torch.randint(0, 3, (2, 8, 8))
    t = rt.Trainer(model, "fp16-amp", loss=nn.CrossEntropyLoss(), quiet=True)
    with torch.no_grad():
        out = model(x)  # the emulated forward (deterministic under fp16-amp), as the step computes it
    expected = float(F.cross_entropy(out, y))
    with deadline(300):
        assert t.step(x, y) == expected
        t.step(x, y)
    check_fractions(t)
    assert all(r["loss_fp64_nats"] not in ("", "nan") for r in rows(t))
    with torch.no_grad():
        out = model(x)
    e = t.evaluate([(x, y)])
    assert e["test_loss_nats"] == pytest.approx(float(F.cross_entropy(out, y)), rel=1e-6)
    assert e["test_accuracy_percent"] == pytest.approx(100.0 * float((out.argmax(1) == y).float().mean()))


def test_a_model_returning_a_dict_trains_with_output_naming_its_logits():
    # torchvision's segmentation models return {"out": logits}: Trainer refused any non-tensor output,
    # even with a loss that read out["out"]. output="out" picks the logits for the loss, the accuracy
    # and the shadow alike.
    torchvision = pytest.importorskip("torchvision", reason="python3-torchvision is not installed")
    torch.manual_seed(6)
    model = torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None, num_classes=3)
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0  # the head's dropout would draw other masks in the step than below
    x, y = torch.randn(1, 3, 32, 32), torch.randint(0, 3, (1, 32, 32))
    with pytest.raises(TypeError, match=r"returned a OrderedDict \(keys 'out'\), not a tensor; .*"
                                        r"Trainer\(\.\.\., output='out'\) picks them"):
        rt.Trainer(copy.deepcopy(model), "fp16-amp", quiet=True, shadow=False).step(x, y)
    t = rt.Trainer(model, "fp16-amp", quiet=True, output="out")
    with torch.no_grad():
        out = model(x)["out"]
    with deadline(600):
        assert t.step(x, y) == float(F.cross_entropy(out, y))
    assert rows(t)[0]["loss_fp64_nats"] not in ("", "nan")
    e = t.evaluate([(x, y)])
    model.eval()  # as evaluate scores: BatchNorm's running statistics
    with torch.no_grad():
        out = model(x)["out"]
    model.train()
    assert e["test_loss_nats"] == pytest.approx(float(F.cross_entropy(out, y)), rel=1e-6)
    with pytest.raises(ValueError, match=r"output='logits' picks nothing from the model's OrderedDict "
                                         r"\(keys 'out'\): KeyError"):
        t.output = "logits"
        t.evaluate([(x, y)])


class MaskedEncoder(nn.Module):
    """A model of two inputs, as a tokenizer's batches come: token ids and a padding mask."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.emb = nn.Embedding(20, 16)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 1)
        self.head = nn.Linear(16, 3)

    def forward(self, input_ids, attention_mask):
        h = self.enc(self.emb(input_ids), src_key_padding_mask=attention_mask == 0)
        return self.head((h * attention_mask.unsqueeze(-1)).sum(1) / attention_mask.sum(1, keepdim=True))


def test_a_model_of_several_inputs_trains_on_a_tuple_or_a_dict():
    # Trainer.step(x, y) took one tensor: a model called with (input_ids, attention_mask) could not
    # train. x may be a tuple of the model's arguments or a dict of its keyword arguments.
    ids = torch.randint(0, 20, (4, 6))
    mask = torch.ones(4, 6, dtype=torch.long)
    mask[1, 4:] = mask[3, 2:] = 0
    y = torch.tensor([0, 2, 1, 2])
    losses = []
    for x in ((ids, mask), {"input_ids": ids, "attention_mask": mask}):
        model = MaskedEncoder()
        t = rt.Trainer(model, "bf16-amp", quiet=True)
        with torch.no_grad():
            expected = float(F.cross_entropy(model(ids, mask), y))  # the emulated forward
        losses.append(t.step(x, y))
        assert losses[-1] == expected
        assert rows(t)[0]["loss_fp64_nats"] not in ("", "nan")
        assert math.isfinite(t.evaluate([(x, y)])["test_loss_nats"])
    assert losses[0] == losses[1]
    with pytest.raises(TypeError, match=r"Trainer.step: x is a tuple whose first entry is not a torch.Tensor"):
        t.step((None, mask), y)
    with pytest.raises(ValueError, match=r"Trainer.step: x holds 4 samples .* but y 3"):
        t.step({"input_ids": ids, "attention_mask": mask}, y[:3])


def test_a_torch_lr_scheduler_steps_the_model_and_its_shadow_alike():
    # A scheduler made on Trainer.optimizer left the shadow's learning rate where it started (and
    # could not be made at all: Emulation.optimizer's step was no bound method). scheduler= makes one
    # per optimizer and steps both once per step.
    t = rt.Trainer(mlp_for_scheduler(), "bf16-amp", quiet=True,
                   scheduler=lambda opt: torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5))
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 0])
    for _ in range(3):
        t.step(x, y)
    assert t.optimizer.param_groups[0]["lr"] == t.shadow_optimizer.param_groups[0]["lr"] == 0.1 / 8
    with pytest.raises(TypeError, match=r"scheduler: StepLR is not a function of the optimizer"):
        rt.Trainer(mlp_for_scheduler(), "bf16-amp", scheduler=torch.optim.lr_scheduler.StepLR(t.optimizer, 1))
    with pytest.raises(ValueError, match=r"scheduler and lr_schedule both set the learning rate"):
        rt.Trainer(mlp_for_scheduler(), "bf16-amp", scheduler=lambda o: None, lr_schedule=lambda s, a: 0.1)


def mlp_for_scheduler():
    torch.manual_seed(10)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))


def test_reduce_lr_on_plateau_steps_on_the_emulated_loss_and_lbfgs_is_refused_by_name():
    # ReduceLROnPlateau.step(metrics) stopped the first step with a TypeError (Trainer stepped every
    # scheduler with no argument); LBFGS.step(closure) did the same, deep inside the scaler's step.
    t = rt.Trainer(mlp_for_scheduler(), "fp16-amp", quiet=True, scheduler=lambda opt: torch.optim.lr_scheduler
                   .ReduceLROnPlateau(opt, factor=0.5, patience=0, threshold=10.0))
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 0])
    for _ in range(3):  # threshold 10 (relative): no loss is an improvement, so each step halves lr
        t.step(x, y)
    assert t.optimizer.param_groups[0]["lr"] == t.shadow_optimizer.param_groups[0]["lr"] == 0.1 / 8
    with pytest.raises(TypeError, match=r"optimizer: LBFGS.step\(closure\) evaluates the model again"):
        rt.Trainer(mlp_for_scheduler(), "fp16-amp", lambda p: torch.optim.LBFGS(p))


def test_a_module_replaced_after_trainer_is_refused_by_name():
    # A new head put in after Trainer() was in no optimizer, and the shadow's old 3-class head stopped
    # the step with "Target 3 is out of bounds".
    model = mlp_for_scheduler()
    t = rt.Trainer(model, "fp16-amp", quiet=True)
    model[2] = nn.Linear(8, 5)
    with pytest.raises(rt.UnsupportedError, match=r"the model's parameters changed since Trainer\(\) \(new: "
                                                  r"2.weight, 2.bias; gone: 2.weight, 2.bias\)"):
        t.step(torch.randn(4, 8), torch.tensor([0, 1, 4, 3]))


class TutorialNet(nn.Module):
    """PyTorch's CIFAR-10 tutorial CNN as it is written: x.view(-1, 16 * 5 * 5) after the pooled
    convolutions (a channels-last view of the emulated conv's output made that view fail)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.pool, self.conv2 = nn.Conv2d(3, 6, 5), nn.MaxPool2d(2, 2), nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(16 * 5 * 5, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def test_the_pytorch_tutorial_cnn_trains_as_written():
    torch.manual_seed(6)
    two_steps(TutorialNet(), torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,)), "bf16-amp")
