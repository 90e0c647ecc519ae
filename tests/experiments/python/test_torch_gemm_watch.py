"""rpsim.torch.emulate's net under the first emulated forwards (_unsupported.GemmWatch): a torch function
that runs a GEMM inside PyTorch's own kernel (the dispatcher ops of torch_names.cpp's aten_gemm rows)
is refused at its call, naming it, instead of computing in PyTorch's arithmetic unnoticed. It found
torch.linalg.matmul (an alias of matmul that ran on OpenBLAS), torch.matrix_power, F.affine_grid
and torch.cov (now run as ATen computes them, on the matmul row: test_torch_stats.py for cov), and
cdist's mm path (now _euclidean_dist's ops: test_torch_distance.py)."""
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn
F = torch.nn.functional


@pytest.fixture
def emulated(as_model):
    """emulated(fn, policy): (the model of fn under policy, its Emulation)."""
    def make(fn, policy="fp16-amp"):
        m = as_model(fn)
        return m, rt.emulate(m, policy)
    return make


def randn(*shape, seed=0, grad=False):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).requires_grad_(grad)


def _unseen(fn, *args):
    """fn(*args) with the torch function modes off (the emulation's among them): only the net sees it."""
    with torch.overrides._no_torch_function_mode():
        return fn(*args)


@pytest.mark.parametrize("fn,name,op", [
    (lambda x: torch.inner(x, x), "torch inner", "aten::mm"),
    (lambda x: _unseen(torch.mm, x, x.t()), "an op rpsim.torch did not see", "aten::mm"),
], ids=["inner-run-natively", "modes-off"])
def test_a_gemm_inside_a_pytorch_kernel_is_refused_naming_its_function(fn, name, op, emulated, monkeypatch):
    # (No torch function left runs a GEMM the watch sees inside its kernel: torch.inner, run natively
    # here without its decomposed row, stands for one.)
    from rpsim.torch import _decompose
    monkeypatch.delitem(_decompose.DECOMPOSED, "inner")
    m, _ = emulated(fn)
    for _ in range(2):  # and again: a forward that raised is watched again
        with pytest.raises(rt.UnsupportedError, match=rf"{name}.* runs a GEMM \({op}\) inside PyTorch's own kernel"):
            m(randn(3, 40))
    with torch.no_grad():  # the first forward without gradients is watched too
        with pytest.raises(rt.UnsupportedError, match=name):
            m(randn(3, 40))
    torch.cdist(randn(3, 40), randn(3, 40))  # (outside the emulation nothing is watched)


def test_ops_without_a_gemm_and_torchs_meta_checks_pass(emulated):
    m, e = emulated(lambda x: (torch.cdist(x, x), torch.einsum("ij,kj->ik", x, x)))  # cdist's direct path
    d, s = m(randn(3, 8))
    assert d.shape == s.shape == (3, 3) and e.counts["decomposed"]["einsum"] == 1


def test_linalg_matmul_is_the_matmul_row(emulated):
    a, b = randn(5, 16, seed=1), randn(16, 3, seed=2)
    m, e = emulated(torch.linalg.matmul)
    twin, _ = emulated(torch.matmul)
    assert torch.equal(m(a, b), twin(a, b)) and e.counts["rpsim kernel"]["linalg_matmul"] == 1


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 6, -2])
def test_matrix_power_is_atens_order_of_matmuls(n, emulated):
    a = (randn(2, 4, 4, seed=3) / 2 + torch.eye(4)).requires_grad_()
    want = torch.linalg.matrix_power(a, n)
    m, _ = emulated(lambda x: torch.linalg.matrix_power(x, n), "fp32")
    got = m(a)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    g1, = torch.autograd.grad(got.sum(), a)
    g2, = torch.autograd.grad(want.sum(), a)
    torch.testing.assert_close(g1, g2, rtol=1e-4, atol=1e-4)
    if n == 5:  # bits 1, 0, 1: z = a, a^2, a^4; result = a, then a @ a^4
        half, _ = emulated(lambda x: x.matrix_power(5))
        twin, _ = emulated(lambda x: torch.matmul(x, torch.matmul(torch.matmul(x, x), torch.matmul(x, x))))
        h = half(a)
        assert torch.equal(h, twin(a)) and torch.equal(h, h.half().float())


@pytest.mark.parametrize("size,align", [((2, 3, 5, 7), False), ((2, 3, 5, 7), True), ((2, 1, 3, 4, 6), False),
                                        ((2, 1, 1, 4), False)])
def test_affine_grid_is_atens_base_grid_times_theta(size, align, emulated):
    theta = randn(2, len(size) - 2, len(size) - 1, seed=4, grad=True)
    want = F.affine_grid(theta, size, align_corners=align)
    m, e = emulated(lambda t: F.affine_grid(t, size, align_corners=align), "fp32")
    got = m(theta)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    g1, = torch.autograd.grad((got * got).sum(), theta)
    g2, = torch.autograd.grad((want * want).sum(), theta)
    torch.testing.assert_close(g1, g2, rtol=1e-5, atol=1e-5)
    assert e.counts["decomposed"]["affine_grid"] == 1 and e.counts["rpsim kernel"]["bmm"] == 1


def test_affine_grid_under_fp16_amp_is_its_bmm_in_binary16_and_a_spatial_transformer_trains(emulated):
    theta = randn(2, 2, 3, seed=5)
    half, _ = emulated(lambda t: F.affine_grid(t, (2, 1, 4, 6), align_corners=False))
    base = F.affine_grid(torch.eye(2, 3).expand(2, 2, 3), (2, 1, 4, 6), align_corners=False)  # exact (x, y)
    base = torch.cat([base, torch.ones(2, 4, 6, 1)], -1).view(2, 24, 3)
    twin, _ = emulated(lambda t: torch.bmm(base, t.transpose(1, 2)).view(2, 4, 6, 2))
    y = half(theta)
    assert torch.equal(y, twin(theta)) and torch.equal(y, y.half().float())

    class Stn(nn.Module):
        def __init__(self):
            super().__init__()
            self.loc = nn.Linear(64, 6)
            self.head = nn.Linear(64, 3)
            with torch.no_grad():
                self.loc.weight.zero_()
                self.loc.bias.copy_(torch.tensor([1.0, 0, 0, 0, 1, 0]))

        def forward(self, x):
            grid = F.affine_grid(self.loc(x.flatten(1)).view(-1, 2, 3), x.shape, align_corners=False)
            return self.head(F.grid_sample(x, grid, align_corners=False).flatten(1))
    torch.manual_seed(6)
    t = rt.Trainer(Stn(), "fp16-amp", lambda p: torch.optim.SGD(p, lr=0.1), quiet=True)
    x, y = torch.rand(4, 1, 8, 8), torch.tensor([0, 1, 2, 0])
    losses = [t.step(x, y) for _ in range(4)]
    assert all(0 < v < 5 for v in losses) and losses[-1] < losses[0]
    assert t.emulation.counts["decomposed"]["affine_grid"] > 0
