"""rpsim/torch/_conv.py's early cast: a convolution rounds its input as the GEMM op would round A
(the op's cast_input, GemmOp::entrywise_cast) before im2col / vol2col, a k*k-th of the roundings,
and the GEMM skips its own cast. Checked bit for bit against the same layers with the cast left to
the GEMM, outputs and every gradient, and that it runs where it may and nowhere else."""
import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("rpsim.torch")
from rpsim.torch import _conv  # noqa: E402
nn = torch.nn


def _late(x, cfg):
    """_cast_input that leaves the cast to the GEMM op (the path before the early cast)."""
    return None, None


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(3, 4, 3, padding=1)
        self.c2 = nn.Conv2d(3, 6, 3, stride=2, padding=1, dilation=1)
        self.g2 = nn.Conv2d(6, 6, 3, padding=2, dilation=2, groups=3, bias=False)
        self.c3 = nn.Conv3d(3, 4, (2, 3, 3), padding=(0, 1, 1))

    def forward(self, x):
        y = self.g2(torch.relu(self.c2(x)))
        z = self.c3(torch.stack([x, 2 * x], 2))
        return y.sum() + z.square().sum() + self.c1(x.flatten(2)[..., :20]).sum()


def _run(policy, cast_input, monkeypatch):
    torch.manual_seed(3)
    net = _Net()
    rt.emulate(net, policy)
    used = []

    def spy(x, cfg):
        cast, fmt = cast_input(x, cfg)
        used.append(cast is not None)
        return cast, fmt
    monkeypatch.setattr(_conv, "_cast_input", spy)
    x = (torch.randn(2, 3, 8, 8) * 3).requires_grad_()
    loss = net(x)
    loss.backward()
    return loss.detach(), x.grad, [p.grad for p in net.parameters()], used


@pytest.mark.parametrize("policy,early", [("fp16-amp", True), ("bf16-amp", True), ("fp8-current", False),
                                          ("nvfp4", False), ("fp32", False)])
def test_a_convolution_casts_its_input_before_im2col_with_the_same_bits(policy, early, monkeypatch):
    loss, dx, grads, used = _run(policy, _conv._cast_input, monkeypatch)
    # Early where the GEMM's cast rounds each entry on its own (autocast's fp16 / bf16 from float32
    # inputs); not under FP8/NVFP4 scaling (a scale over the whole tensor first), nor where the cast
    # changes nothing (fp32).
    assert used and all(u == early for u in used)
    loss2, dx2, grads2, _ = _run(policy, _late, monkeypatch)
    assert torch.equal(loss, loss2) and torch.equal(dx, dx2)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads2))


def test_cast_input_rounds_as_the_gemm_op_and_declines_otherwise():
    from rpsim import _core
    op = _core._GemmOp.of_policy("fp16-amp", "conv2d")
    x = torch.tensor([[1 + 2 ** -12, 70000.0, 2 ** -30, -0.1]])
    values, fmt = op.cast_input(x.numpy(), "binary32")
    assert fmt == "binary16"
    assert values.shape == (1, 1, 4) and values.dtype == x.numpy().dtype
    assert values[0, 0].tolist() == [1.0, float("inf"), 0.0, float(torch.tensor(-0.1).half())]
    assert op.cast_input(x.numpy(), "binary16") is None  # already values of fp16: nothing to round
    assert _core._GemmOp.of_policy("fp8-current", "conv2d").cast_input(x.numpy(), "binary32") is None


def _run_patches(policy, patches, dtype, monkeypatch):
    torch.manual_seed(4)
    net = _Net().to(dtype)
    rt.emulate(net, policy)
    used = []

    def spy(x, cast, geometry):
        p = patches(x, cast, geometry)
        used.append(p is not None)
        return p
    monkeypatch.setattr(_conv, "_patches", spy)
    x = (torch.randn(2, 3, 8, 8, dtype=dtype) * 3).requires_grad_()
    loss = net(x)
    loss.backward()
    return loss.detach(), x.grad, [p.grad for p in net.parameters()], used


@pytest.mark.parametrize("policy,dtype", [("fp16-amp", torch.float32), ("bf16-pure", torch.float32),
                                          ("fp8-current", torch.float32), ("mxfp8", torch.float32),
                                          ("fp64", torch.float64)])
def test_conv2d_made_by_the_op_from_its_input_gives_the_bits_of_the_torch_columns(policy, dtype, monkeypatch):
    # (_patches: the GEMM op im2cols conv1d/conv2d's A, dense and grouped, straight into its binary64
    # carrier instead of reading float32 columns made in torch, under early casts, FP8 and MX scaling,
    # and the FP64 shadow's float64.)
    loss, dx, grads, used = _run_patches(policy, _conv._patches, dtype, monkeypatch)
    assert used and all(used)
    loss2, dx2, grads2, used2 = _run_patches(policy, lambda x, cast, geometry: None, dtype, monkeypatch)
    assert not any(used2)
    assert torch.equal(loss, loss2) and _same(dx, dx2) and any(g is not None for g in grads)
    assert all(_same(a, b) for a, b in zip(grads, grads2))


def _same(a, b):
    """Both None (bf16-pure's input, which takes no gradient), or the same values."""
    return a is None and b is None or (a is not None and b is not None and torch.equal(a, b))


def test_the_ops_patches_are_im2col_folded_and_a_bad_input_is_named():
    np = pytest.importorskip("numpy")
    from rpsim import _core
    op = _core._GemmOp.of_policy("fp16-amp", "conv2d")
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 6)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((1, 3 * 2 * 3, 4))
    geometry = ((2, 3), (1, 2), (1, 0), (2, 1))
    cols = _core._im2col(x, *geometry)  # (N, C*kh*kw, L)
    want, _ = op.forward(cols.transpose(0, 2, 1), "binary32", b, fold_a=True)
    got, _ = op.forward(np.zeros((2, cols.shape[2], cols.shape[1]), np.float32), "binary32", b, fold_a=True,
                        patches=(x,) + geometry)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
    with pytest.raises(TypeError, match="patches: x's dtype int32"):
        op.forward(cols.transpose(0, 2, 1), "binary32", b, fold_a=True, patches=(x.astype(np.int32),) + geometry)
