"""torch.cov and torch.corrcoef under rpsim.torch.emulate (rpsim/torch/_stats.py): ATen's composites
(Correlation.cpp) step by step, their one mm on the matmul row, where GemmWatch refused them before.
Checked against torch's own under fp32 (values and gradients, with and without frequency and
analytic weights), torch's errors and warning, and under fp16-amp bit for bit against the same
steps written out (the mm in binary16)."""
import warnings

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")

G = torch.Generator().manual_seed(0)
X = torch.randn(3, 40, generator=G)
FW, AW = torch.randint(0, 4, (40,), generator=G), torch.rand(40, generator=G)


@pytest.mark.parametrize("kw", [{}, {"correction": 0}, {"fweights": FW}, {"aweights": AW},
                                {"fweights": FW, "aweights": AW, "correction": 2}],
                         ids=["plain", "correction-0", "fweights", "aweights", "both"])
def test_cov_under_fp32_is_torchs(kw, as_model):
    x = X.clone().requires_grad_()
    want = torch.cov(x, **kw)
    m = as_model(lambda t: torch.cov(t, **kw))
    e = rt.emulate(m, "fp32")
    got = m(x)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    g1, = torch.autograd.grad(got.sum(), x)
    g2, = torch.autograd.grad(want.sum(), x)
    torch.testing.assert_close(g1, g2, rtol=1e-6, atol=1e-6)
    assert e.counts["decomposed"]["cov"] == 1 and e.counts["rpsim kernel"]["mm"] == 1


def test_corrcoef_and_the_edge_shapes_are_torchs(as_model):
    m = as_model(torch.corrcoef)
    rt.emulate(m, "fp32")
    torch.testing.assert_close(m(X), torch.corrcoef(X), rtol=1e-6, atol=1e-6)
    c = as_model(torch.cov)
    rt.emulate(c, "fp32")
    v = torch.randn(7, generator=G)
    torch.testing.assert_close(c(v), torch.cov(v), rtol=1e-6, atol=1e-6)  # one variable: a scalar
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert torch.isnan(c(torch.ones(1, 1)))  # one observation: no degree of freedom
    assert any("degrees of freedom is <= 0" in str(x.message) for x in w)


@pytest.mark.parametrize("call,match", [
    (lambda t: torch.cov(t.view(1, 3, 40)), "two or fewer dimensions"),
    (lambda t: torch.cov(t, fweights=-FW - 1), "fweights cannot be negative"),
    (lambda t: torch.cov(t, fweights=AW), "fweights to have integral dtype"),
    (lambda t: torch.cov(t, aweights=AW[:5]), "same numel as there are observations"),
    (lambda t: torch.cov(t, fweights=torch.zeros(40, dtype=torch.long)), "weights sum to zero"),
], ids=["rank", "negative", "dtype", "numel", "zero-sum"])
def test_cov_raises_torchs_errors(call, match, as_model):
    with pytest.raises(RuntimeError, match=match):
        call(X)  # torch's own
    m = as_model(call)
    rt.emulate(m, "fp32")
    with pytest.raises(RuntimeError, match=match):
        m(X)


def test_cov_under_fp16_amp_is_its_steps_with_the_mm_in_binary16(as_model):
    def steps(x):
        xc = x - (x.sum(1) / torch.tensor(40)).unsqueeze(1)
        return torch.true_divide(torch.mm(xc, xc.t()), torch.tensor(39)).squeeze()
    m, twin = as_model(torch.cov), as_model(steps)
    rt.emulate(m, "fp16-amp")
    rt.emulate(twin, "fp16-amp")
    y = m(X)
    assert torch.equal(y, twin(X)) and torch.equal(y, y.half().float())
    assert not torch.equal(y, torch.cov(X))
