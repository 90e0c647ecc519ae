"""torch.cdist under rpsim.torch.emulate (_distance): ATen's mm path (_euclidean_dist: p = 2 past 25 rows,
or compute_mode="use_mm_for_euclid_dist") runs as its ops under the emulation, with _euclidean_dist's own
backward; every other case is ATen's _cdist_forward (no GEMM). cdist is on autocast's fp32 list: under
an autocast policy its matmul computes in binary32. (The mm path was refused: a VQ-VAE's codebook
lookup, a prototypical network's distances.)"""
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")
from torch import nn  # noqa: E402


class Dist(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, a, b):
        return torch.cdist(a, b, **self.kw)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def run(policy, a, b, **kw):
    """(distances, grad a, grad b, summary) of cdist(a, b) under `policy`, the gradient of a weighted sum."""
    a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
    m = Dist(**kw)
    em = rt.emulate(m, policy)
    d = m(a, b)
    (d * randn(*d.shape, seed=9, dtype=d.dtype)).sum().backward()
    return d.detach(), a.grad, b.grad, em.summary()


def test_the_mm_path_is_atens_with_its_own_backward():
    a, b = randn(40, 5, seed=1, dtype=torch.float64), randn(30, 5, seed=2, dtype=torch.float64)
    a[3] = b[7]  # a zero distance: _euclidean_dist_backward's subgradient 0, where sqrt's would be inf
    d, ga, gb, summary = run("fp64", a, b)
    assert "decomposed: cdist x1" in summary and "matmul x" in summary
    a0, b0 = a.clone().requires_grad_(), b.clone().requires_grad_()
    ref = torch.cdist(a0, b0)
    (ref * randn(*ref.shape, seed=9, dtype=ref.dtype)).sum().backward()
    assert d[3, 7] == 0 and torch.isfinite(ga).all() and torch.isfinite(gb).all()
    torch.testing.assert_close(d, ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ga, a0.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(gb, b0.grad, rtol=1e-10, atol=1e-12)


def test_under_autocast_the_whole_op_is_binary32():
    # fp16-amp: cdist on the fp32 list, its inputs in binary32 and its matmul too (not cast to binary16):
    # the bits of the fp32 policy, forward and backward; a binary16 matmul would differ.
    a, b = randn(40, 6, seed=3), randn(33, 6, seed=4)
    amp, fp32 = run("fp16-amp", a, b), run("fp32", a, b)
    for x, y in zip(amp[:3], fp32[:3]):
        assert torch.equal(x, y)
    halved = torch.cdist(a.half().float(), b.half().float())
    assert not torch.equal(amp[0], halved)


def test_the_direct_path_is_atens_cdist_forward():
    a, b = randn(20, 5, seed=5), randn(25, 5, seed=6)  # 25 rows or fewer: no mm
    for kw in ({}, {"p": 1.0}, {"compute_mode": "donot_use_mm_for_euclid_dist"}):
        d, _, _, summary = run("fp32", a if kw == {} else randn(40, 5, seed=5), b, **kw)
        assert "_cdist_forward x1" in summary and "matmul" not in summary
        assert torch.equal(d, torch.cdist(a if kw == {} else randn(40, 5, seed=5), b, **kw))


def test_batches_broadcast_and_torchs_errors():
    a, b = randn(2, 30, 4, seed=7), randn(1, 28, 4, seed=8)
    d, ga, gb, _ = run("fp32", a, b, compute_mode="use_mm_for_euclid_dist")
    assert d.shape == (2, 30, 28) and ga.shape == a.shape and gb.shape == b.shape
    torch.testing.assert_close(d, torch.cdist(a, b), rtol=1e-5, atol=1e-5)
    m = Dist(compute_mode="mm")
    rt.emulate(m, "fp32")
    with pytest.raises(ValueError, match="mm is not a valid value for compute_mode"):
        m(a, b)
    m = Dist()
    rt.emulate(m, "fp32")
    with pytest.raises(RuntimeError, match="X1 and X2 must have the same number of columns"):
        m(randn(30, 4), randn(30, 5))


def test_a_vq_codebook_lookup_trains_under_trainer():
    class VQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.codebook, self.dec = nn.Linear(8, 4), nn.Embedding(40, 4), nn.Linear(4, 8)

        def forward(self, x):
            z = self.enc(x)
            zq = self.codebook(torch.cdist(z, self.codebook.weight).argmin(1))
            out = self.dec(z + (zq - z).detach())  # the straight-through estimator
            return out, ((zq - z.detach()) ** 2).mean() + 0.25 * ((z - zq.detach()) ** 2).mean()

    torch.manual_seed(0)
    model = VQ()
    trainer = rt.Trainer(model, "fp16-amp", lambda p: torch.optim.Adam(p, 1e-3),
                         loss=lambda out, y: nn.functional.mse_loss(out[0], y) + out[1], histogram_steps=())
    x = randn(32, 8, seed=10)
    losses = [trainer.step(x, x) for _ in range(2)]
    assert all(torch.isfinite(torch.tensor(v)) for v in losses)
    assert "decomposed: cdist x" in trainer.emulation.summary()
    assert model.codebook.weight.grad.abs().sum() > 0
