"""rpsim.torch.emulate: `rpsim train`'s policies on any nn.Module, the op and policy tables read
from C++, ops per path in the summary, unclassified module types listed (issue #27)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn
F = torch.nn.functional


def is_format(t, fmt):
    v = t.detach().double().numpy()
    return np.array_equal(v, rpsim.round(v, fmt))


class Odd(nn.Module):  # a module type no table knows
    def forward(self, x):
        return torch.tanh(x) * 0.5


def mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.Linear(16, 16), Odd(), nn.LayerNorm(16),
                         nn.Linear(16, 4))


def test_tables_come_from_the_cli():
    with pytest.raises(ValueError) as e:
        rt.emulate(mlp(), "fp17")
    for name in rt.policies():  # the C++ table's names: the error lists each of them
        assert name in str(e.value)
    ops = rt.ops()
    assert ops["linear"]["autocast"] == "lower_precision" and ops["softmax"]["autocast"] == "fp32"
    assert ops["relu"]["autocast"] == "follow_inputs"
    # a policy object as configs write it is resolved by the C++ parser
    with pytest.raises(ValueError, match="update_roundin"):
        rt.emulate(mlp(), {"name": "bf16-pure", "update_roundin": "sr"})


def test_fp16_amp_linear_equals_the_emulated_gemm_and_outputs_are_binary16():
    m = mlp()
    emu = rt.emulate(m, "fp16-amp")
    x = torch.randn(5, 12)
    seen = {}
    m[0].register_forward_hook(lambda mod, a, out: seen.__setitem__("l0", out))
    m[4].register_forward_hook(lambda mod, a, out: seen.__setitem__("ln", out))
    y = m(x)
    rule = emu.policy["ops"]["linear"]
    cfg = rt.GemmConfig(rule["accumulation"], compute=rule["compute"], output=rule["output"])
    expect = rt.linear(x, m[0].weight, m[0].bias, config=cfg)
    assert torch.equal(seen["l0"], expect)
    assert is_format(seen["l0"], "binary16") and is_format(y, "binary16")
    assert not is_format(seen["ln"], "binary16")  # layer_norm is on autocast's fp32 list
    y.sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    s = emu.summary()
    # GELU and LayerNorm are rows of the op table: the CLI's layers; Odd's tanh and mul are not.
    assert "rpsim kernel: gelu x1, layer_norm x1, linear x3" in s
    assert "binary32: mul x1, tanh x1" in s
    assert "Odd" in s.splitlines()[-1]


def test_bf16_pure_stores_parameters_in_bfloat16_with_the_policy_update_rounding():
    m = mlp()
    emu = rt.emulate(m, {"name": "bf16-pure", "update_rounding": "sr"}, seed=3)
    assert all(is_format(p, "bf16") for p in m.parameters())
    opt = emu.optimizer(torch.optim.SGD(m.parameters(), lr=1e-3))
    F.cross_entropy(m(torch.randn(8, 12)), torch.randint(0, 4, (8,))).backward()
    assert all(is_format(p.grad, "bf16") for p in m.parameters())
    before = [p.detach().clone() for p in m.parameters()]
    opt.step()
    assert all(is_format(p, "bf16") for p in m.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, m.parameters()))


def test_weights_written_after_emulate_are_stored_in_the_policy_format_before_the_next_forward():
    # A checkpoint loaded after emulate() (and a WGAN's clamp_ after the step) left float32 weights
    # that the forward ran on unrounded; they are rounded (nearest) at the next forward, as a GPU
    # holding bfloat16 weights stores them. The forward then equals that of the rounded weights.
    m = mlp()
    checkpoint = {k: v.clone() for k, v in mlp(seed=1).state_dict().items()}
    rt.emulate(m, "bf16-pure")
    m.load_state_dict(checkpoint)
    assert not all(is_format(p, "bf16") for p in m.parameters())
    x = torch.randn(4, 12)
    out = m(x)
    assert all(is_format(p, "bf16") for p in m.parameters())
    twin = mlp(seed=1)
    with torch.no_grad():
        for p in twin.parameters():
            p.copy_(torch.from_numpy(rpsim.round(p.double().numpy(), "bf16")))
    rt.emulate(twin, "bf16-pure")
    assert torch.equal(out, twin(x))
    with torch.no_grad():
        m[0].weight.clamp_(-0.0101, 0.0101)
    m(x)
    assert is_format(m[0].weight, "bf16") and m[0].weight.abs().max() <= 0.0101


def test_accumulation_override_and_functional_matmuls():
    class Attn(nn.Module):
        def forward(self, q, k):
            return torch.softmax(torch.matmul(q, k.transpose(-2, -1)), -1) @ k
    m = Attn()
    emu = rt.emulate(m, "bf16-amp", accumulation="tc:h100:bf16:fp32")
    q, k = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    out = m(q, k)
    assert "rpsim kernel: matmul x2" in emu.summary()  # torch.matmul and @
    assert "softmax" in emu.summary()
    scores = rt.matmul(rpsim_round(q, "bf16"), rpsim_round(k, "bf16").transpose(-2, -1), "tc:h100:bf16:fp32")
    assert is_format(out, "bf16")
    assert torch.allclose(out, torch.softmax(scores, -1) @ k, atol=0.05)


def rpsim_round(t, fmt):
    return torch.from_numpy(rpsim.round(t.numpy(), fmt))


def f32(v):
    return float(np.float32(v))


def test_fp8_current_scaling_of_a_linear_layer_by_hand():
    torch.manual_seed(1)
    lin = nn.Linear(40, 6)
    emu = rt.emulate(lin, "fp8-current")
    x = torch.randn(5, 40) * 30
    y = lin(x)
    rule = emu.policy["ops"]["linear"]
    assert rule["compute"] == "e4m3" and rule["backward_compute"] == "e5m2" and rule["scaled_inputs"]

    def q(t, s):
        v = rpsim.round(t.detach().double().numpy() * s, "binary32")
        return rpsim.round(np.clip(v, -448, 448), "e4m3")
    sx, sw = f32(448 / float(x.abs().max())), f32(448 / float(lin.weight.abs().max()))
    acc = rpsim.gemm(q(x, sx), q(lin.weight, sw).T, model=rule["accumulation"])
    acc = rpsim.round(acc * f32(1 / (sx * sw)), "binary32")
    expect = rpsim.round(acc + lin.bias.detach().double().numpy(), "binary32")
    assert np.array_equal(y.detach().double().numpy(), expect)
    y.sum().backward()  # dy = 1: scale 57344 (e5m2's max), exact
    assert lin.weight.grad is not None and torch.isfinite(lin.weight.grad).all()
    dy = emu.layer_ops["Linear"].fp8_stats()["dy"]
    assert (dy["amax"], dy["scale"], dy["entries"], dy["saturated"], dy["flushed"]) == (1.0, 57344.0, 30, 0, 0)


def test_fp8_delayed_scaling_reads_the_history():
    lin = nn.Linear(8, 4)
    emu = rt.emulate(lin, "fp8-delayed")
    state = None
    seen = []
    for k in (1.0, 4.0, 2.0):
        lin(torch.full((2, 8), k))
        state = state or next(iter(emu.layer_ops.values()))
        x_stats = state.fp8_stats()["x"]
        seen.append((x_stats["amax"], x_stats["scale"]))
    # Transformer Engine's delayed scaling (sim/scaling, as rpsim train): scale 1 on the first use,
    # then from the largest amax seen before (1, then 4), not the use's own (2). The zero- and
    # inf-amax rules are tested on the C++ side (tests/sim/train/test_layers.cpp).
    assert seen == [(1.0, 1.0), (4.0, 448.0), (2.0, f32(448 / 4.0))]


def test_bad_input():
    with pytest.raises(ValueError, match="fp7-amp"):
        rt.emulate(mlp(), "fp7-amp")
    with pytest.raises(ValueError, match="tc:zz"):
        rt.emulate(mlp(), "fp16-amp", accumulation="tc:zz")
    with pytest.raises(TypeError, match="nn.Module"):
        rt.emulate(lambda x: x, "fp32")
    # fp64 stores binary64 weights: a float32 model is refused by name, a float64 one runs in binary64.
    with pytest.raises(ValueError, match=r"policy fp64 .*torch.float32.*model.double\(\)"):
        rt.emulate(mlp(), "fp64")
    m = mlp().double()
    rt.emulate(m, "fp64")
    x = torch.linspace(-1, 1, 36, dtype=torch.float64).reshape(3, 12)
    assert m(x).dtype == torch.float64 and m(x).isfinite().all()


def test_a_failing_forward_leaves_no_emulation_active():
    m = nn.Linear(3, 2)
    emu = rt.emulate(m, "fp16-amp")
    with pytest.raises(ValueError, match="A is"):
        m(torch.ones(2, 4))  # wrong width: the GEMM says so
    before = sum(sum(c.values()) for c in emu.counts.values())
    torch.ones(4).exp().sum()  # outside the model: not emulated, not counted
    assert sum(sum(c.values()) for c in emu.counts.values()) == before
    emu.remove()
    assert not is_format(m(torch.full((1, 3), 1 / 3)), "binary16")


def test_layer_norm_and_gelu_run_on_the_cli_layers_where_those_express_the_call():
    torch.manual_seed(1)
    m = nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.LayerNorm(16), nn.GELU(approximate="tanh"),
                      nn.LayerNorm(16, eps=1e-6), nn.Linear(16, 4))
    emu = rt.emulate(m, "bf16-amp")
    m(torch.randn(5, 12)).sum().backward()
    kernel, binary32 = emu.summary().splitlines()[1:3]
    # exact erf GELU and a 1-D affine LayerNorm with eps 1e-5: the C++ layers; the tanh form and
    # another eps: PyTorch's kernels in binary32 (test_torch_vs_cli compares the first with the CLI)
    assert "gelu x1" in kernel and "layer_norm x1" in kernel
    assert "gelu x1" in binary32 and "layer_norm x1" in binary32
    assert m[2].weight.grad is not None and bool(torch.isfinite(m[2].weight.grad).all())
    with pytest.raises(ValueError, match="softmax.*not a layer of the op table"):
        rpsim._core._TorchLayer("softmax", "fp32", 16)
    with pytest.raises(ValueError, match="out"):  # a row whose layer needs arguments of its own
        rpsim._core._TorchLayer("linear", "fp32", 16)


def test_an_indexed_view_keeps_its_base_format():
    # PyTorch 1.13's TorchFunctionMode does not see x[0], x[1:] or x[i]: their views lost the
    # binary16 mark of a Linear's output under fp16-amp and an add of two of them was rounded to
    # binary32, not binary16 as autocast adds two float16 tensors (an RNN's padded steps xp[t] did).
    # They take their base's format, the same bits as the ops the mode sees (select, narrow).
    class Sum(nn.Module):
        def __init__(self, how):
            super().__init__()
            torch.manual_seed(4)
            self.lin, self.how = nn.Linear(8, 8), how

        def forward(self, x):
            y = self.lin(x)
            if self.how == "seen":
                return y.select(0, 0) + y.narrow(0, 1, 1).select(0, 0) * 3
            return y[0] + y[1:2][0] * 3 if self.how == "indexed" else y

    x = torch.randn(2, 8)
    out = {}
    for how in ("seen", "indexed", "y"):
        m = Sum(how)
        rt.emulate(m, "fp16-amp")
        out[how] = m(x).detach()
    y = out["y"].double()
    assert torch.equal(out["seen"], out["indexed"])
    assert torch.equal(out["indexed"], out["indexed"].half().float())  # binary16 values
    assert not torch.equal(out["indexed"].double(), y[0] + y[1] * 3)  # not binary32's (exact here)


def test_mv_is_a_name_of_the_matmul_row():
    # torch.mv was refused ("write it with matmul"); autocast runs it in float16 as it runs matmul, and
    # it is one more name of the op table's matmul row: the same bits as matmul on a column, forward
    # and gradients, and out= (spectral_norm's power iteration writes torch.mv(w, v, out=v)).
    assert "mv" in rt.ops()["matmul"]["torch_functions"]

    class Mv(nn.Module):
        def __init__(self, how):
            super().__init__()
            torch.manual_seed(5)
            self.w, self.how = nn.Parameter(torch.randn(6, 8)), how

        def forward(self, v):
            if self.how == "mv":
                return torch.mv(self.w, v)
            if self.how == "out":
                with torch.no_grad():
                    return torch.mv(self.w, v, out=torch.empty(6))
            return (self.w @ v.unsqueeze(-1)).squeeze(-1)

    v = torch.randn(8)
    got = {}
    for how in ("mv", "matmul", "out"):
        m = Mv(how)
        e = rt.emulate(m, "fp16-amp")
        y = m(v)
        if how != "out":
            (y * torch.arange(6.0)).sum().backward()
        got[how] = (y.detach(), m.w.grad)
        assert sum(e.counts["rpsim kernel"].values()) == 1  # one emulated GEMM
    assert torch.equal(got["mv"][0], got["matmul"][0]) and torch.equal(got["mv"][1], got["matmul"][1])
    assert torch.equal(got["out"][0], got["mv"][0])
    assert torch.equal(got["mv"][0], got["mv"][0].half().float())


def test_dot_is_a_row_that_follows_its_inputs_and_spectral_norm_trains():
    # torch.dot was refused, and with it spectral_norm (sigma = dot(u, mv(W, v))). autocast lists dot
    # in neither list: its row follows its inputs, a binary32 row-times-column GEMM of binary32 values
    # under fp16-amp, where mv runs in binary16.
    row = rt.ops()["dot"]
    assert row["torch_functions"] == ["dot", "vdot"] and row["torch_kernel"] == "gemm"
    torch.manual_seed(6)
    u, v = torch.randn(64), torch.randn(64)

    class Dot(nn.Module):
        def forward(self, u, v):
            return torch.dot(u, v), torch.vdot(u, v)
    m = Dot()
    e = rt.emulate(m, "fp16-amp")
    d, vd = m(u, v)
    assert e.counts["rpsim kernel"]["dot"] == e.counts["rpsim kernel"]["vdot"] == 1
    seq = np.float32(0)
    for a, b in zip(u.numpy(), v.numpy()):  # sequential binary32: fma-free product, then the add
        seq = np.float32(seq + np.float32(a * b))
    assert d.item() == seq  # binary32 accumulation in order, not binary16
    assert torch.equal(d, vd) and d.dtype == torch.float32
    torch.manual_seed(7)
    net = nn.Sequential(nn.utils.parametrizations.spectral_norm(nn.Linear(8, 8)), nn.ReLU(), nn.Linear(8, 3))
    t = rt.Trainer(net, "fp16-amp", quiet=True)
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 0])
    losses = [t.step(x, y) for _ in range(3)]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert t.emulation.counts["rpsim kernel"]["dot"] > 0 and t.emulation.counts["rpsim kernel"]["mv"] > 0


def _sequential_binary32(c, a, b):
    """c + a @ b in binary32, each product rounded then added in k order (the follow-inputs rows'
    binary32 GEMM under fp16-amp, as test_dot_is_a_row... checks for dot)."""
    out = c.numpy().astype(np.float32).copy()
    for k in range(a.shape[1]):
        out = out + np.outer(a[:, k].numpy(), b[k].numpy()).astype(np.float32)
    return out


@pytest.mark.parametrize("policy,twin_policy,fmt,dtype", [("fp16-amp", "fp32", "binary32", torch.float32),
                                                         ("fp16-pure", "fp16-pure", "binary16", torch.float16)])
def test_in_place_gemms_are_emulated_in_their_inputs_format(policy, twin_policy, fmt, dtype, as_model):
    """x.addmm_(a, b), baddbmm_, addmv_, addbmm_ ran as binary32 GEMMs on OpenBLAS, outside the
    emulation. autocast casts no in-place op, so each is the gemm_in_place row, a GEMM in its
    inputs' format (binary32 under fp16-amp; binary16 under fp16-pure, on model.half()'s float16
    tensors too), its value written into x: the bits of the functional addmm where the policy's
    own row gives that format."""
    assert rt.ops()["gemm_in_place"]["torch_functions"] == ["addmm_", "baddbmm_", "addmv_", "addbmm_"]
    g = torch.Generator().manual_seed(8)
    a, b, c = (torch.randn(s, generator=g).to(dtype) for s in [(5, 64), (64, 3), (5, 3)])
    calls = {"addmm_": lambda c, a, b: c.clone().addmm_(a, b),
             "baddbmm_": lambda c, a, b: c[None].clone().baddbmm_(a[None], b[None])[0],
             "addmv_": lambda c, a, b: c[:, 0].clone().addmv_(a, b[:, 0]).unsqueeze(1),
             "addbmm_": lambda c, a, b: c.clone().addbmm_(a[None], b[None])}
    for name, fn in calls.items():
        m = as_model(fn)
        e = rt.emulate(m, policy)
        got = m(c, a, b)
        assert e.counts["rpsim kernel"][name] == 1 and is_format(got, fmt)
        twin = as_model(torch.addmm)
        rt.emulate(twin, twin_policy)
        assert torch.equal(got, twin(c, a, b)[:, :got.shape[1]]), name
    if fmt == "binary32":
        assert np.array_equal(got.numpy(), _sequential_binary32(c, a, b))
        assert not torch.equal(got, c.clone().addmm_(a, b))  # OpenBLAS's own order is another value


def test_addbmm_is_an_addmm_per_batch_under_autocast_and_torchs_under_fp32(as_model):
    """torch.addbmm was refused; now it is the matmul row's: under fp16-amp autocast casts its operands
    to binary16 and ATen adds one addmm per batch into the running binary16 result."""
    g = torch.Generator().manual_seed(9)
    c, b1, b2 = (torch.randn(s, generator=g, requires_grad=True) for s in [(4, 5), (3, 4, 16), (3, 16, 5)])
    m = as_model(lambda c, b1, b2: torch.addbmm(c, b1, b2, beta=0.5))
    rt.emulate(m, "fp32")
    got, want = m(c, b1, b2), torch.addbmm(c, b1, b2, beta=0.5)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    grads = torch.autograd.grad(got.sum(), (c, b1, b2))
    for x, y in zip(grads, torch.autograd.grad(want.sum(), (c, b1, b2))):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)
    half = as_model(torch.addbmm)

    def chain(c, b1, b2):
        out = c
        for i in range(b1.shape[0]):
            out = torch.addmm(out, b1[i], b2[i])
        return out
    twin = as_model(chain)
    rt.emulate(half, "fp16-amp")
    rt.emulate(twin, "fp16-amp")
    y = half(c, b1, b2)
    assert torch.equal(y, twin(c, b1, b2)) and is_format(y, "binary16")


def test_torch_autocast_around_an_emulated_model_changes_no_bit():
    # The policy is the emulated autocast; PyTorch's own (CPU bfloat16 here) is not applied on top.
    torch.manual_seed(8)
    m = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
    rt.emulate(m, "fp16-amp")
    x = torch.randn(4, 8)
    plain = m(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = m(x)
    assert inside.dtype == torch.float32 and torch.equal(plain, inside)


def test_a_torch_lr_scheduler_drives_the_emulated_optimizer():
    # Emulation.optimizer replaced step with a plain function; torch's LR schedulers wrap a bound
    # method (step.__self__) and failed with an AttributeError when made on it.
    torch.manual_seed(9)
    m = nn.Linear(8, 3)
    e = rt.emulate(m, "fp16-pure")
    opt = e.optimizer(torch.optim.SGD(m.parameters(), lr=0.1))
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    for _ in range(3):
        opt.zero_grad()
        m(torch.randn(4, 8)).sum().backward()
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == 0.1 / 8 and e.step == 3
    assert torch.equal(m.weight, m.weight.half().float())  # the policy's store still ran
