"""rpsim.torch.emulate's autocast: an op of autocast's lower-precision list that is not a GEMM row
(torch_names.cpp: prelu, addr) computes on its inputs cast to the low format, as torch.autocast casts
them on a GPU, and its gradient reaches them in that format. Before, prelu computed on the binary32
values and rounded once (its binary32 weight never cast), and addr was on no list (binary32 out)."""
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn
F = torch.nn.functional

LOW = {"fp16-amp": torch.float16, "bf16-amp": torch.bfloat16}


def low(t, policy):
    """t's values cast to the policy's low format (round to nearest even), as float32."""
    return t.detach().to(LOW[policy]).float()


@pytest.mark.parametrize("policy", ["fp16-amp", "bf16-amp"])
def test_prelu_computes_on_its_inputs_cast_to_the_low_format(policy, as_model):
    """GPU autocast: prelu(x.half(), w.half()) in half arithmetic (the product computed in float and
    rounded once to half); the gradients of x and w are half tensors cast back."""
    torch.manual_seed(0)
    m = nn.PReLU(1, init=0.3001)  # a binary32 weight no 16-bit format holds
    x = (torch.rand(4096) * 4 - 3).requires_grad_()  # binary32 activations, most negative
    rt.emulate(m, policy)
    y = m(x)
    x16, w16 = low(x, policy), low(m.weight, policy)
    want = torch.where(x16 > 0, x16, (w16 * x16).to(LOW[policy]).float())
    assert torch.equal(y.detach(), want)
    assert not torch.equal(y.detach(), F.prelu(x.detach(), m.weight.detach()).to(LOW[policy]).float())
    g = torch.rand(4096)
    y.backward(g)
    g16 = low(g, policy)
    assert torch.equal(x.grad, torch.where(x16 > 0, g16, (w16 * g16).to(LOW[policy]).float()))
    x_ref, w_ref = x16.clone().requires_grad_(), w16.clone().requires_grad_()
    F.prelu(x_ref, w_ref).backward(g16)  # the weight's sum in binary32 (CPU order), then the cast
    assert torch.equal(m.weight.grad, low(w_ref.grad, policy))


@pytest.mark.parametrize("policy", ["fp16-amp", "bf16-amp"])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 3.0)])
def test_addr_is_cudas_kernel_in_the_low_format(policy, beta, alpha, as_model):
    """torch.addr under autocast: its inputs cast, then beta * self + (alpha * vec1) * vec2 in half
    arithmetic, each product and the sum rounded (CUDA's addr_kernel_cuda on c10::Half)."""
    g = torch.Generator().manual_seed(1)
    c, v1, v2 = torch.randn(64, 48, generator=g), torch.randn(64, generator=g), torch.randn(48, generator=g)
    m = as_model(lambda c, v1, v2: torch.addr(c, v1, v2, beta=beta, alpha=alpha))
    e = rt.emulate(m, policy)
    got = m(c, v1, v2)
    dt = LOW[policy]
    c16, a16, b16 = (low(t, policy).to(dt) for t in (c, v1, v2))
    prod = ((torch.tensor(alpha).to(dt) * a16.float()).to(dt).float()[:, None] * b16.float()).to(dt)
    want = ((torch.tensor(beta).to(dt) * c16.float()).to(dt).float() + prod.float()).to(dt).float()
    assert torch.equal(got, want) and e.counts["decomposed"]["addr"] == 1
    once = torch.addr(c16.float(), a16.float(), b16.float(), beta=beta, alpha=alpha).to(dt).float()
    assert not torch.equal(got, once)  # one rounding of the binary32 value is another result


def test_addr_under_fp32_is_torchs_and_beta_zero_ignores_nan(as_model):
    g = torch.Generator().manual_seed(2)
    c, v1, v2 = (torch.randn(s, generator=g, requires_grad=True) for s in [(5, 4), (5,), (4,)])
    m = as_model(lambda c, v1, v2: torch.addr(c, v1, v2, beta=0.5, alpha=2.0))
    rt.emulate(m, "fp32")
    got, want = m(c, v1, v2), torch.addr(c, v1, v2, beta=0.5, alpha=2.0)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    for x, y in zip(torch.autograd.grad(got.sum(), (c, v1, v2)), torch.autograd.grad(want.sum(), (c, v1, v2))):
        torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-6)
    nan = torch.full((5, 4), float("nan"))
    zero = as_model(lambda c, a, b: torch.addr(c, a, b, beta=0))
    rt.emulate(zero, "fp16-amp")
    assert torch.isfinite(zero(nan, v1, v2)).all()


def test_an_op_on_no_list_is_not_cast(as_model):
    """autocast casts only the ops of its lists: tanh follows its binary32 input."""
    x = torch.rand(8) + 0.1234567
    m = as_model(torch.tanh)
    rt.emulate(m, "fp16-amp")
    assert torch.equal(m(x), torch.tanh(x))
