"""rpsim.torch as a demanding user meets it: what it cannot emulate (torch.conv_tbc,
activation checkpointing, a model off the CPU, a second derivative) raises
rpsim.torch.UnsupportedError naming the thing and what to write instead, in a line or two (issue #36:
the refusals listed the whole op table, ~1,500 characters); a module type no path carries is refused
by emulate() itself, not at the first step; arguments of the wrong kind raise TypeError naming the
argument, a misspelt name ValueError with the table's names; an in-place op keeps the rounded value
in the tensor the caller holds. (nn.LSTM, nn.GRU, nn.RNN, their cells and nn.MultiheadAttention are
emulated: test_torch_decomposed.py.)"""
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")
from torch import nn  # noqa: E402
import torch.utils.checkpoint  # noqa: E402 (a submodule torch does not import itself)


def short(message):
    # A line or two: the thing, the fix, where the lists are; not the whole op table.
    assert len(message) < 400, message
    assert "rpsim.torch.ops()" in message or "write it with" in message


def test_a_module_with_fused_gemms_is_refused_by_emulate(monkeypatch):
    """The table has no such module type left (ConvTranspose3d is emulated now): one row of it made up
    here, the mechanism checked."""
    from rpsim.torch import _unsupported
    monkeypatch.setitem(_unsupported.FUSED_MODULES, nn.ConvTranspose3d, "conv_tbc")
    model = nn.Sequential(nn.Linear(4, 4), nn.ConvTranspose3d(2, 2, 1))
    with pytest.raises(rt.UnsupportedError, match=r"module 1 \(ConvTranspose3d\) runs torch conv_tbc, whose "
                                                 r"GEMMs are one PyTorch kernel.*write it with conv1d") as e:
        rt.emulate(model, "fp16-amp")
    short(str(e.value))
    assert isinstance(e.value, ValueError)
    rt.emulate(model[:1], "fp16-amp")  # (nothing was left on the model: the rest emulates)


def test_a_function_with_fused_gemms_is_refused_at_its_call():
    class Tbc(nn.Module):
        def forward(self, a):
            return torch.conv_tbc(a, torch.ones(3, 2, 4), torch.zeros(4), 1)
    m = Tbc()
    rt.emulate(m, "fp32")
    with pytest.raises(rt.UnsupportedError, match="torch conv_tbc .*conv1d on the input permuted") as e:
        m(torch.randn(5, 2, 2))
    short(str(e.value))


class Checkpointed(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.fc1, self.fc2, self.kw = nn.Linear(4, 4), nn.Linear(4, 3), kw

    def forward(self, x):
        return self.fc2(torch.utils.checkpoint.checkpoint(lambda z: torch.relu(self.fc1(z)), x, **self.kw))


@pytest.mark.parametrize("kw", [{}, {"use_reentrant": False}], ids=["reentrant", "non_reentrant"])
def test_activation_checkpointing_is_refused_by_name(kw):
    # It recomputes its forward in the backward, after the emulation's mode has ended (the reentrant
    # form is a custom autograd Function whose backward is that recomputation; the non-reentrant one
    # failed with an IndexError inside torch.utils.checkpoint's inner_pack during backward()).
    model = Checkpointed(**kw)
    rt.emulate(model, "fp16-amp")
    with torch.no_grad():  # inference recomputes nothing: it runs
        model(torch.randn(2, 4))
    x = torch.randn(2, 4, requires_grad=True)
    with pytest.raises(rt.UnsupportedError, match=r"torch.utils.checkpoint in the model's forward: .*without "
                                                  r"activation checkpointing") as e:
        model(x).sum().backward()
    assert len(str(e.value)) < 400


def test_a_full_backward_hook_runs_and_changes_no_bits():
    # register_full_backward_hook puts PyTorch's BackwardHookFunction (an identity) in the graph; it
    # was refused as a custom autograd Function.
    torch.manual_seed(0)
    x = torch.randn(3, 4) * 1e-3
    grads, seen = [], []
    for hooked in (False, True):
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 3))
        torch.manual_seed(1)
        for p in model.parameters():
            nn.init.normal_(p)
        if hooked:
            model[0].register_full_backward_hook(lambda m, gi, go: seen.append(go[0].clone()))
        rt.emulate(model, "fp16-amp")
        model(x).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    assert len(seen) == 1 and seen[0].shape == (3, 4)
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_a_model_or_batch_off_the_cpu_is_refused_by_name():
    # (the meta device stands for a GPU here: the check is on the device type, and this torch is CPU-only)
    with pytest.raises(rt.UnsupportedError, match="model parameter weight is on meta: .*CPU"):
        rt.emulate(nn.Linear(4, 3, device="meta"), "fp16-amp")
    with pytest.raises(rt.UnsupportedError, match="model parameter weight is on meta"):
        rt.Trainer(nn.Linear(4, 3, device="meta"), "fp16-amp")
    model = nn.Linear(4, 3)
    rt.emulate(model, "fp16-amp")
    with pytest.raises(rt.UnsupportedError, match="input .*is on meta"):
        model(torch.randn(2, 4, device="meta"))
    t = rt.Trainer(nn.Linear(4, 3), "fp32")
    with pytest.raises(rt.UnsupportedError, match="batch y is on meta"):
        t.step(torch.randn(2, 4), torch.zeros(2, dtype=torch.long, device="meta"))


@pytest.mark.parametrize("model", [nn.Linear(4, 3), nn.Sequential(nn.Linear(4, 4, bias=False), nn.GELU())])
def test_a_second_derivative_through_rpsim_kernels_is_refused(model):
    rt.emulate(model, "fp16-amp")
    x = torch.randn(2, 4, requires_grad=True)
    y = model(x).square().sum()
    with pytest.raises(rt.UnsupportedError, match=r"second derivative \(create_graph=True"):
        torch.autograd.grad(y, x, create_graph=True)
    # a first derivative is fine
    model(x).square().sum().backward()
    assert x.grad is not None


def test_an_in_place_op_keeps_the_rounded_value():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            y = self.fc(x)
            y.mul_(3.3)  # the result ignored: y itself must hold it, rounded
            return y

    class OutOfPlace(Model):
        def forward(self, x):
            return self.fc(x) * 3.3
    torch.manual_seed(0)
    a, b = Model(), OutOfPlace()
    b.load_state_dict(a.state_dict())
    rt.emulate(a, "fp16-pure")
    rt.emulate(b, "fp16-pure")
    x = torch.randn(5, 4)
    ya, yb = a(x), b(x)
    assert torch.equal(ya, ya.half().float())  # binary16 values
    assert torch.equal(ya, yb)
    ya.sum().backward()
    yb.sum().backward()
    assert torch.equal(a.fc.weight.grad, b.fc.weight.grad)

    class Leaf(Model):  # requires_grad_ is in place without arithmetic: nothing to round
        def forward(self, x):
            self.x = x.requires_grad_()
            return self.fc(x)
    c = Leaf()
    rt.emulate(c, "fp16-pure")
    c(torch.randn(5, 4)).sum().backward()
    assert c.x.grad is not None and c.x.is_leaf


def test_wrong_kinds_of_argument_name_the_argument():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"policy: int is neither a name of the policy table \(fp32, fp64, "):
        rt.emulate(m, 3)
    with pytest.raises(TypeError, match="seed: 'a' is not an integer"):
        rt.emulate(m, "fp32", seed="a")
    with pytest.raises(TypeError, match="model: str is not a torch.nn.Module"):
        rt.Trainer("gpt", "fp32")
    with pytest.raises(TypeError, match="optimizer: SGD is not a function of the parameters"):
        rt.Trainer(m, "fp32", torch.optim.SGD(m.parameters(), lr=0.1))
    with pytest.raises(TypeError, match="loss: 'mse' is not a function"):
        rt.Trainer(m, "fp32", None, "mse")
    scalers = "none, static, pytorch, deepspeed"
    with pytest.raises(TypeError, match=rf"scaler: int is neither .* \({scalers}"):
        rt.Trainer(m, "fp32", scaler=3)
    with pytest.raises(TypeError, match=rf"policy: float is not a name of the loss-scaler table \({scalers}"):
        rt.GradScaler(2.0)
    with pytest.raises(TypeError, match="histogram_steps: 'all' is not a collection of step numbers"):
        rt.Trainer(m, "fp32", histogram_steps="all")
    t = rt.Trainer(nn.Linear(2, 2), "fp32")
    with pytest.raises(TypeError, match="Trainer.step: x is a list whose first entry is not a torch.Tensor"):
        t.step([[1.0, 2.0]], torch.tensor([0]))


def test_misspelt_names_list_the_table():
    m = nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r'unknown policy "bf16-pur" \(did you mean bf16-pure\?\).*nvfp4'):
        rt.Trainer(m, "bf16-pur")
    with pytest.raises(ValueError, match=r"policy\.name: unknown policy .*known: fp32"):
        rt.emulate(m, {"name": "fp16amp"})
    with pytest.raises(ValueError, match="unknown loss scaler policy 'deepspeeed' .*deepspeed"):
        rt.Trainer(m, "fp16-amp", scaler="deepspeeed")
    with pytest.raises(ValueError, match="loss 'cross_entropyy' is not a loss of the op table"):
        rt.RpsimLoss("cross_entropyy")


def test_a_model_is_emulated_once():
    m = nn.Linear(2, 2)
    emu = rt.emulate(m, "fp32")
    with pytest.raises(ValueError, match=r"already under emulate \(policy fp32\).*remove\(\)"):
        rt.emulate(m, "fp16-amp")
    emu.remove()
    rt.emulate(m, "fp16-amp").remove()
    # A Trainer that fails after emulating (here: the scaler's name) hands the model back un-emulated.
    with pytest.raises(ValueError, match="deepspeeed"):
        rt.Trainer(m, "fp16-amp", scaler="deepspeeed")
    t = rt.Trainer(m, "fp16-amp", scaler="deepspeed")
    with pytest.raises(ValueError, match=r"already under emulate \(policy fp16-amp\).*Trainer.emulation.remove"):
        rt.Trainer(m, "fp32")
    t.emulation.remove()
    rt.Trainer(m, "fp32")


def test_saving_an_emulated_model_is_refused_by_name_and_works_after_remove(tmp_path):
    # torch.save(model) pickled the emulation's local hook: "Can't pickle local object".
    import copy
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 3))
    emulation = rt.emulate(model, "fp16-amp")
    with pytest.raises(rt.UnsupportedError, match=r"torch.save / pickle of a model under emulate.*state_dict"):
        torch.save(model, tmp_path / "model.pt")
    torch.save(model.state_dict(), tmp_path / "weights.pt")  # the weights save as they are
    x = torch.randn(2, 4)
    twin = copy.deepcopy(model)  # an EMA-style copy keeps its emulation
    assert torch.equal(twin(x), model(x))
    emulation.remove()
    torch.save(model, tmp_path / "model.pt")
    assert torch.equal(torch.load(tmp_path / "model.pt")(x), model(x))


def test_torchscript_is_refused_by_name():
    # register_forward_hook failed inside emulate() with "not supported on ScriptModules".
    for model, name in ((torch.jit.script(nn.Sequential(nn.Linear(8, 8))), "RecursiveScriptModule"),
                        (nn.Sequential(torch.jit.script(nn.Linear(8, 8)), nn.ReLU()), "0"),
                        (torch.jit.trace(nn.Linear(8, 8), torch.randn(2, 8)), "TopLevelTracedModule")):
        with pytest.raises(rt.UnsupportedError, match=rf"emulate: module {name} is TorchScript .*emulate the "
                                                      r"eager nn.Module") as e:
            rt.emulate(model, "fp16-amp")
        assert len(str(e.value)) < 400


def dense_or_sparse(sparse):
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(30, 8, sparse=sparse), nn.Flatten(), nn.Linear(24, 3))


@pytest.mark.parametrize("policy", ["fp16-amp", "fp16-pure", "bf16-amp", "nvfp4"])
def test_sparse_embedding_gradients_give_the_dense_bits(policy):
    # nn.Embedding(sparse=True) failed in GradScaler.unscale_ and in the gradient's rounding ("can't
    # convert Sparse layout tensor to numpy"). Their entries are unscaled and rounded as the dense
    # gradient's: three steps give the dense run's weights, bit for bit.
    def run(sparse):
        model = dense_or_sparse(sparse)
        x, y = torch.randint(0, 30, (16, 3)), torch.randint(0, 3, (16,))
        e = rt.emulate(model, policy)
        opt, scaler = e.optimizer(torch.optim.SGD(model.parameters(), lr=0.1)), rt.GradScaler("pytorch")
        for _ in range(3):
            opt.zero_grad()
            scaler.scale(nn.functional.cross_entropy(model(x), y)).backward()
            assert model[0].weight.grad.is_sparse == sparse
            scaler.step(opt)
            scaler.update()
        return [p.detach().clone() for p in model.parameters()]
    dense, sparse = run(False), run(True)
    assert not torch.equal(dense[0], dense_or_sparse(False)[0].weight)  # it trained
    assert all(torch.equal(d, s) for d, s in zip(dense, sparse))


def test_sparse_embeddings_are_refused_where_they_cannot_run():
    with pytest.raises(rt.UnsupportedError, match=r"Trainer: module 0: an embedding with sparse=True .*set "
                                                  r"sparse=False") as e:
        rt.Trainer(dense_or_sparse(True), "fp16-amp")
    assert len(str(e.value)) < 400
    with pytest.raises(rt.UnsupportedError, match=r"emulate: module 0: a bfloat16 embedding with sparse=True: .*"
                                                  r"set sparse=False"):
        rt.emulate(dense_or_sparse(True).bfloat16(), "bf16-pure")


def test_a_lazy_module_is_refused_until_its_first_forward():
    """nn.LazyLinear's parameters do not exist before a batch has run: refused by name, with the fix;
    after one forward the model emulates."""
    model = nn.Sequential(nn.Linear(4, 4), nn.LazyLinear(3))
    with pytest.raises(rt.UnsupportedError, match=r"module 1 \(LazyLinear\) has uninitialized parameters.*"
                                                 r"run the model once on a batch") as e:
        rt.emulate(model, "fp16-amp")
    short(str(e.value))
    with pytest.raises(rt.UnsupportedError, match="LazyLinear"):
        rt.Trainer(model, "fp16-amp", lambda p: torch.optim.SGD(p, lr=0.1))
    model(torch.randn(2, 4))
    rt.emulate(model, "fp16-amp")
    assert model(torch.randn(2, 4)).shape == (2, 3)


class FftFeatures(nn.Module):
    """An FNet-style mixing step: the real part of an FFT, a complex product between."""

    def __init__(self, weight=None):
        super().__init__()
        self.a, self.h, self.w = nn.Linear(8, 8), nn.Linear(8, 3), weight

    def forward(self, x):
        z = torch.fft.fft(self.a(x)) * torch.exp(1j * torch.linspace(0, 1, 8))
        if self.w is not None:  # a complex GEMM
            z = z @ torch.view_as_complex(self.w)
        return self.h(torch.fft.ifft(z).real)


def test_complex_values_run_listed_and_a_complex_parameter_or_gemm_is_refused_by_name():
    # A complex parameter stopped emulate() with KeyError: torch.complex64; the complex ops between
    # ran unlisted. They are listed as PyTorch's complex arithmetic, unrounded.
    torch.manual_seed(0)
    model = FftFeatures()
    t = rt.Trainer(model, "fp16-amp", quiet=True)
    t.step(torch.randn(4, 8), torch.arange(4) % 3)
    assert {"fft_fft", "fft_ifft", "exp", "mul"} <= set(t.emulation.counts["complex"])
    assert "  complex: exp x1, fft_fft x1, fft_ifft x1, mul x2" in t.emulation.summary()
    with pytest.raises(rt.UnsupportedError, match=r"parameter w is complex64: rpsim's formats are real"):
        rt.emulate(nn.ParameterDict({"w": nn.Parameter(torch.zeros(2, dtype=torch.cfloat))}), "fp16-amp")
    gemm = FftFeatures(nn.Parameter(torch.randn(8, 8, 2)))
    rt.emulate(gemm, "fp16-amp")
    with pytest.raises(rt.UnsupportedError, match=r"a complex64 tensor: rpsim's formats and GEMMs are real"):
        gemm(torch.randn(4, 8))  # x @ w (a TypeError there read "unsupported operand type(s) for @")


class Magnitude(nn.Module):
    def forward(self, z):
        return z.abs()


def test_abs_of_a_complex_tensor_is_arithmetic_rounded_to_the_policys_format():
    # abs is a layout op on real values (exact); on complex ones it is sqrt(re^2 + im^2), and it kept
    # its binary32 result under bf16-pure, marked as a bfloat16 value.
    z = torch.fft.fft(torch.randn(2, 8, generator=torch.Generator().manual_seed(1)))
    model = Magnitude()
    e = rt.emulate(model, "bf16-pure")
    exact = z.abs()
    assert not torch.equal(exact, exact.bfloat16().float())  # values the rounding changes
    assert torch.equal(model(z), exact.bfloat16().float())
    assert e.counts["binary32"] == {"abs": 1} and e.counts["layout"] == {}
