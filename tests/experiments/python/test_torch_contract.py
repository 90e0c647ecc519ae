"""torch.einsum and torch.tensordot under rpsim.torch.emulate (experiments/python/rpsim/torch/_contract.py):
run as ATen lowers them, permutes and sums around one bmm (mm) on the op table's GEMM row. Checked
against torch's own einsum and tensordot in fp32 (values, gradients, shapes, errors), and under
fp16-amp bit for bit against the same contraction written with matmul, whose GEMM row is the one
einsum's bmm reaches."""
import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("rpsim.torch")
nn = torch.nn
F = torch.nn.functional

# (equation, operand shapes): batched products, attention's two, a dot, an outer product, a
# diagonal, a transpose, an implicit output, broadcast ellipses, two contracted dimensions, three
# operands (left to right), a subscript one operand alone holds, uppercase subscripts.
CASES = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhid,bhjd->bhij", [(2, 3, 5, 4), (2, 3, 6, 4)]),
    ("bhij,bhjd->bhid", [(2, 3, 5, 6), (2, 3, 6, 4)]),
    ("i,i->", [(7,), (7,)]),
    ("bi,bi->b", [(3, 7), (3, 7)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->i", [(4, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ijk,jkl->il", [(2, 3, 4), (3, 4, 5)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ij,jk,k->i", [(3, 4), (4, 5), (5,)]),
    ("ijx,jk->ik", [(3, 4, 2), (4, 5)]),
    ("iJ,Jk->ik", [(3, 4), (4, 5)]),
    ("ii,ij->j", [(3, 3), (3, 2)]),
    ("ii...->i...", [(3, 3, 2, 4)]),
]


class Contract(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _matches_torch_under_fp32(fn, ops):
    """fn(*ops) emulated under fp32 has torch's shape, and its value and the gradients of its sum are
    within 1e-5 of torch's; the Emulation."""
    want = fn(*ops)
    want.sum().backward()
    grads = [t.grad.clone() for t in ops]
    for t in ops:
        t.grad = None
    m = Contract(fn)
    em = rt.emulate(m, "fp32")
    got = m(*ops)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    got.sum().backward()
    for t, g in zip(ops, grads):
        torch.testing.assert_close(t.grad, g, rtol=1e-5, atol=1e-5)
    return em


def _operands(shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, requires_grad=True) for s in shapes]


@pytest.mark.parametrize("equation,shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_under_fp32_is_torchs_einsum(equation, shapes):
    em = _matches_torch_under_fp32(lambda *xs: torch.einsum(equation, *xs), _operands(shapes))
    assert "einsum" in str(em.summary())


def test_einsum_takes_the_list_form_and_torchs_errors():
    a, b = _operands([(2, 3), (3, 4)])
    m = Contract(lambda x, y: torch.einsum("ij,jk->ik", [x, y]))
    rt.emulate(m, "fp32")
    torch.testing.assert_close(m(a, b), a @ b, rtol=1e-5, atol=1e-5)
    bad = Contract(lambda x, y: torch.einsum("ij,jk->ik", x, x))
    rt.emulate(bad, "fp32")
    with pytest.raises(RuntimeError, match="einsum\\(\\): subscript j has size 2 for operand 1"):
        bad(a, b)


def _attention_scores(fn):
    class Scores(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.q, self.k, self.v = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 16)
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = (p(x).view(b, t, 4, 4).transpose(1, 2) for p in (self.q, self.k, self.v))
            att = fn("scores", q, k).softmax(-1)
            y = fn("mix", att, v).transpose(1, 2).reshape(b, t, 16)
            return self.head(y.mean(1))
    return Scores()


def _with_einsum(which, a, b):
    return torch.einsum("bhid,bhjd->bhij" if which == "scores" else "bhij,bhjd->bhid", a, b)


def _with_matmul(which, a, b):
    return a @ (b.transpose(-1, -2) if which == "scores" else b)


@pytest.mark.parametrize("policy,dtype", [("fp16-amp", torch.float16), ("bf16-amp", torch.bfloat16)])
def test_einsum_under_autocast_casts_its_inputs_and_runs_its_inner_ops_uncast(policy, dtype):
    """autocast casts einsum's inputs once and runs it whole with autocast excluded (autocast_mode.h,
    WrapFunction_): an outer product is a product of 16-bit values rounded to 16 bits (it was a
    binary32 product of the binary32 inputs), and a subscript one operand alone holds is summed from
    the 16-bit values into a 16-bit result before the bmm (sum is on autocast's fp32 list, which
    einsum's inner ops do not see)."""
    a, b = _operands([(6,), (5,)], seed=3)
    m = Contract(lambda x, y: torch.einsum("i,j->ij", x, y))
    rt.emulate(m, policy)
    lo = [t.detach().to(dtype).float() for t in (a, b)]
    assert torch.equal(m(a, b), (lo[0][:, None] * lo[1]).to(dtype).float())
    x, w = _operands([(3, 4, 7), (4, 5)], seed=4)
    s = x.detach().to(dtype).float().sum(-1).to(dtype).float()  # the x-sum first, as ATen's einsum
    einsum, twin = Contract(lambda x, w: torch.einsum("ijx,jk->ik", x, w)), Contract(torch.matmul)
    rt.emulate(einsum, policy)
    rt.emulate(twin, policy)
    assert torch.equal(einsum(x, w), twin(s, w))


@pytest.mark.parametrize("policy", ["fp16-amp", "bf16-amp", "fp8"])
def test_einsum_attention_trains_with_the_bits_of_its_matmul_twin(policy):
    """The same model with einsum and with matmul: each einsum reaches the bmm row with K in index
    order, so Trainer's losses and weights agree bit for bit; and the scores are binary16 values
    under fp16-amp (the GEMM's output format), not binary32 ones."""
    x = torch.randn(4, 6, 16, generator=torch.Generator().manual_seed(1))
    y = torch.arange(4) % 10
    runs = []
    for fn in (_with_einsum, _with_matmul):
        model = _attention_scores(fn)
        tr = rt.Trainer(model, policy, lambda p: torch.optim.SGD(p, lr=0.5), loss=F.cross_entropy,
                        shadow=False, histogram_steps=())
        losses = [tr.step(x, y) for _ in range(3)]
        runs.append((losses, [p.detach().clone() for p in model.parameters()]))
    assert runs[0][0] == runs[1][0]
    for p, q in zip(runs[0][1], runs[1][1]):
        assert torch.equal(p, q)
    if policy == "fp16-amp":
        q = k = torch.randn(2, 4, 6, 4)
        out = Contract(lambda a, b: torch.einsum("bhid,bhjd->bhij", a, b))
        rt.emulate(out, policy)
        s = out(q, k)
        assert torch.equal(s, s.half().float()), "the scores are not binary16 values"
        assert not torch.equal(s, torch.einsum("bhid,bhjd->bhij", q, k))


@pytest.mark.parametrize("dims,shapes", [(2, [(3, 4, 5), (4, 5, 6)]), (1, [(3, 4), (4, 2)]),
                                         (([1, 0], [0, 2]), [(4, 3, 2), (3, 5, 4)]), (0, [(2,), (3,)])])
def test_tensordot_under_fp32_is_torchs_and_fp16_amp_is_its_mm(dims, shapes):
    a, b = _operands(shapes)
    want = torch.tensordot(a, b, dims=dims)
    m = Contract(lambda x, y: torch.tensordot(x, y, dims=dims))
    rt.emulate(m, "fp32")
    got = m(a, b)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    half = Contract(lambda x, y: torch.tensordot(x, y, dims=dims))
    rt.emulate(half, "fp16-amp")
    h = half(a, b)
    assert torch.equal(h, h.half().float())


@pytest.mark.parametrize("fn,shapes", [
    (torch.inner, [(3, 4), (5, 4)]), (torch.inner, [(4,), (4,)]), (torch.inner, [(), (2, 3)]),
    (torch.kron, [(2, 3), (4, 5)]), (torch.kron, [(2,), (3, 2)]),
    (lambda c, m, v: torch.addmv(c, m, v, beta=0.5, alpha=2.0), [(3,), (3, 4), (4,)]),
], ids=["inner", "inner-1d", "inner-scalar", "kron", "kron-ranks", "addmv"])
def test_inner_kron_addmv_under_fp32_are_torchs(fn, shapes):
    _matches_torch_under_fp32(fn, _operands(shapes))


def test_under_fp16_amp_addmv_is_addmm_and_kron_a_product():
    """addmv on the addmm row (autocast's float16 list holds both); kron is no GEMM: its products
    follow their inputs, binary32 values stay binary32."""
    c, m, v = _operands([(3,), (3, 4), (4,)])
    a = Contract(lambda c, m, v: torch.addmv(c, m, v))
    twin = Contract(lambda c, m, v: torch.addmm(c.unsqueeze(-1), m, v.unsqueeze(-1)).squeeze(-1))
    rt.emulate(a, "fp16-amp")
    rt.emulate(twin, "fp16-amp")
    y = a(c, m, v)
    assert torch.equal(y, twin(c, m, v)) and torch.equal(y, y.half().float())
    k = Contract(torch.kron)
    rt.emulate(k, "fp16-amp")
    x, z = _operands([(2, 2), (2, 3)])
    assert torch.equal(k(x, z), torch.kron(x, z))


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_under_fp32_is_torchs_and_under_fp16_amp_its_two_gemms(bias):
    """nn.Bilinear as ATen's _trilinear: per output feature x1 W_k (a bmm) then a row-wise dot with x2
    (a bmm), so under fp16-amp each feature is the low format's value of those two GEMMs in a
    binary32 tensor (+ bias in binary32), the bits of the same two GEMMs written with matmul."""
    torch.manual_seed(0)
    m = nn.Bilinear(5, 4, 3, bias=bias)
    x1, x2 = _operands([(2, 6, 5), (2, 6, 4)])
    want = m(x1, x2)
    want.sum().backward()
    grads = [t.grad.clone() for t in (x1, x2, *m.parameters())]
    for t in (x1, x2, *m.parameters()):
        t.grad = None
    rt.emulate(m, "fp32")
    got = m(x1, x2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    got.sum().backward()
    for t, g in zip((x1, x2, *m.parameters()), grads):
        torch.testing.assert_close(t.grad, g, rtol=1e-5, atol=1e-5)
    half = nn.Bilinear(5, 4, 3, bias=bias)
    w, b = half.weight.detach().clone(), None if half.bias is None else half.bias.detach().clone()

    def twin(a, c):
        a, c = a.reshape(-1, 5), c.reshape(-1, 4)
        cols = [((a @ w[k]).unsqueeze(1) @ c.unsqueeze(2)).reshape(-1, 1) for k in range(3)]
        out = torch.zeros(a.shape[0], 3).add_(torch.cat(cols, 1)).reshape(2, 6, 3)
        return out if b is None else out + b
    rt.emulate(half, "fp16-amp")
    t = Contract(twin)
    rt.emulate(t, "fp16-amp")
    y = half(x1, x2)
    assert y.dtype == torch.float32 and torch.equal(y, t(x1, x2))
    if not bias:
        assert torch.equal(y, y.half().float())


@pytest.mark.parametrize("shapes", [[(3, 4), (4, 5)], [(2, 9), (9, 3), (3, 7)], [(9, 2), (2, 9), (9, 2)],
                                    [(3, 3), (3, 3), (3, 3)], [(4,), (4, 6), (6, 2), (2, 5), (5,)],
                                    [(5, 2), (2, 8), (8, 3), (3, 6), (6, 4)]])
def test_multi_dot_and_chain_matmul_take_atens_order(shapes):
    """Values and gradients within 1e-5 of torch's under fp32; under fp16-amp the bits of the same mm
    written in the order ATen's matrix-chain programme picks (order() below, an independent
    enumeration of every parenthesization, the first of least cost; of three on a tie, (AB)C)."""
    ops = _operands(shapes)
    want = torch.linalg.multi_dot(ops)
    m = Contract(lambda *xs: torch.linalg.multi_dot(list(xs)))
    rt.emulate(m, "fp32")
    torch.testing.assert_close(m(*ops), want, rtol=1e-5, atol=1e-5)
    mats = [o.unsqueeze(0) if i == 0 and o.dim() == 1 else o.unsqueeze(-1) if o.dim() == 1 else o
            for i, o in enumerate(ops)]

    def order(i, j):  # (cost, product) of mats[i..j]: the first split of least cost, strict less
        if i == j:
            return 0, mats[i]
        best = None
        for k in range(i, j):
            cl, left = order(i, k)
            cr, right = order(k + 1, j)
            cost = cl + cr + mats[i].shape[0] * mats[k].shape[1] * mats[j].shape[1]
            if best is None or cost < best[0] or (len(mats) == 3 and cost == best[0] and k == j - 1):
                best = (cost, left @ right)
        return best
    half = Contract(lambda *xs: torch.linalg.multi_dot(list(xs)))
    twin = Contract(lambda *xs: order(0, len(mats) - 1)[1])
    rt.emulate(half, "fp16-amp")
    rt.emulate(twin, "fp16-amp")
    got = half(*ops)
    assert torch.equal(got, twin(*ops).reshape(got.shape))
    if all(o.dim() == 2 for o in ops):
        chain = Contract(lambda *xs: torch.chain_matmul(*xs))
        rt.emulate(chain, "fp16-amp")
        assert torch.equal(chain(*ops), got)
