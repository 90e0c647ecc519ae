"""rpsim.torch's emulated GEMM ops: forward and both backward GEMMs equal rpsim.gemm on the same
operands, bit for bit, under several accumulation models (issue #27)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")
F = torch.nn.functional

MODELS = ["tc:h100:fp16:fp32", "sequential:fp16:rne", "sequential:binary32:rne", "blocked:32:bf16",
          "cublas:h100:fp16:fp32", "tc:a100:bf16:fp32"]


def rand(*shape, seed=0, scale=1.0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale


def gemm(a, b, model, c=None):
    return rpsim.gemm(np.asarray(a), np.asarray(b), None if c is None else np.asarray(c), model=model)


@pytest.mark.parametrize("model", MODELS)
def test_mm_forward_and_both_backward_gemms(model):
    a = rand(9, 40, seed=1).requires_grad_()
    b = rand(40, 7, seed=2).requires_grad_()
    d = rt.mm(a, b, model)
    assert np.array_equal(d.detach().numpy(), gemm(a.detach(), b.detach(), model))
    g = rand(9, 7, seed=3, scale=1e-3)
    d.backward(g)
    assert np.array_equal(a.grad.numpy(), gemm(g, b.detach().T, model))
    assert np.array_equal(b.grad.numpy(), gemm(a.detach().T, g, model))


@pytest.mark.parametrize("model", MODELS[:3])
def test_bmm_matmul_broadcast_and_float32(model):
    a, b = rand(3, 5, 16, seed=4), rand(3, 16, 6, seed=5)
    d = rt.bmm(a, b, model)
    for i in range(3):
        assert np.array_equal(d[i].numpy(), gemm(a[i], b[i], model))
    # matmul broadcasting: a (2, 3, 5, 16) against b (16, 6), in float32
    a4 = rand(2, 3, 5, 16, seed=6).float()
    d4 = rt.matmul(a4, b[0].float(), model)
    assert d4.dtype == torch.float32 and d4.shape == (2, 3, 5, 6)
    assert np.array_equal(d4[1, 2].double().numpy(), gemm(a4[1, 2].double(), b[0].float().double(), model))
    v = rand(16, seed=7)
    assert np.array_equal(rt.matmul(a[0], v, model).numpy(), gemm(a[0], v.reshape(16, 1), model).reshape(-1))


@pytest.mark.parametrize("model", ["tc:h100:fp16:fp32", "sequential:fp16:rne"])
def test_addmm_and_baddbmm_take_c_as_the_gemm_does(model):
    a, b, c = rand(6, 24, seed=8), rand(24, 5, seed=9), rand(6, 5, seed=10)
    assert np.array_equal(rt.addmm(c, a, b, model=model).numpy(), gemm(a, b, model, c))
    bias = rand(5, seed=11)  # broadcast over rows, as torch.addmm does
    assert np.array_equal(rt.addmm(bias, a, b, model=model).numpy(),
                          gemm(a, b, model, bias.expand(6, 5).contiguous()))
    ab, bb, cb = rand(2, 6, 24, seed=12), rand(2, 24, 5, seed=13), rand(2, 6, 5, seed=14)
    d = rt.baddbmm(cb, ab, bb, model=model)
    assert np.array_equal(d[1].numpy(), gemm(ab[1], bb[1], model, cb[1]))


@pytest.mark.parametrize("model", ["tc:h100:fp16:fp32", "sequential:fp16:rne"])
def test_addbmm_is_one_addmm_per_batch_into_the_running_result_and_addmv_a_column(model):
    """addbmm as ATen computes it on CPU and CUDA (LinearAlgebra.cpp, addbmm_impl_): the result starts
    as input and each batch in order is one GEMM with the running result as C, rounded each time
    (not one GEMM over the batches' K); addmv is addmm on the vector as a column."""
    ab, bb, c = rand(3, 6, 24, seed=12), rand(3, 24, 5, seed=13), rand(6, 5, seed=14)
    want = c.numpy()
    for i in range(3):
        want = gemm(ab[i], bb[i], model, want)
    assert np.array_equal(rt.addbmm(c, ab, bb, model=model).numpy(), want)
    one_gemm = gemm(ab.permute(1, 0, 2).reshape(6, 72), bb.reshape(72, 5), model, c)
    # Under the tensor-core model the two orders differ (the test tells them apart); a sequential
    # binary16 sum with C first rounds at the same adds either way.
    assert np.array_equal(want, one_gemm) == model.startswith("sequential")
    m, v, cv = rand(6, 24, seed=15), rand(24, seed=16), rand(6, seed=17)
    assert np.array_equal(rt.addmv(cv, m, v, model=model).numpy(),
                          gemm(m, v.reshape(24, 1), model, cv.reshape(6, 1)).reshape(-1))


def test_beta_zero_ignores_c_as_torch_does():
    """torch.addmm, baddbmm, addbmm, addmv with beta = 0 do not propagate NaN or inf from input: the
    result is the one a zero input gives (0 * NaN in the epilogue gave NaN)."""
    a, b = rand(4, 8, seed=18), rand(8, 3, seed=19)
    calls = [lambda c: rt.addmm(c, a, b, beta=0), lambda c: rt.baddbmm(c[None], a[None], b[None], beta=0, alpha=2),
             lambda c: rt.addbmm(c, a[None], b[None], beta=0), lambda c: rt.addmv(c[:, 0], a, b[:, 0], beta=0)]
    for call in calls:
        for bad in (float("nan"), float("inf")):
            got = call(torch.full((4, 3), bad, dtype=torch.float64))
            assert torch.isfinite(got).all() and torch.equal(got, call(torch.zeros(4, 3, dtype=torch.float64)))
    assert torch.isfinite(torch.addmm(torch.full((4, 3), float("nan")), a.float(), b.float(), beta=0)).all()


@pytest.mark.parametrize("model", ["tc:h100:fp16:fp32", "sequential:fp16:rne"])
def test_linear_is_the_gemm_with_a_bias_epilogue(model):
    x, w, bias = rand(4, 3, 20, seed=15), rand(8, 20, seed=16), rand(8, seed=17)
    y = rt.linear(x, w, None, model)
    assert np.array_equal(y.reshape(12, 8).numpy(), gemm(x.reshape(12, 20), w.T, model))
    out_fmt = rt.GemmConfig(model).accumulation_format
    yb = rt.linear(x, w, bias, model)
    expect = rpsim.round(gemm(x.reshape(12, 20), w.T, model) + np.asarray(bias), out_fmt)
    assert np.array_equal(yb.reshape(12, 8).numpy(), expect)
    # the module form and nn.Linear's parameters
    lin = torch.nn.Linear(20, 8).double()
    emu = rt.Linear.from_module(lin, model)
    assert emu.weight is lin.weight
    assert np.array_equal(emu(x).detach().reshape(12, 8).numpy(),
                          rpsim.round(gemm(x.reshape(12, 20), lin.weight.detach().T, model)
                                      + lin.bias.detach().numpy(), out_fmt))


def test_conv2d_is_im2col_times_the_weight():
    model = "tc:h100:fp16:fp32"
    x, w = rand(2, 3, 9, 8, seed=18), rand(4, 3, 3, 3, seed=19)
    y = rt.conv2d(x, w, None, stride=2, padding=1, model=model)
    ref = F.conv2d(x, w, None, stride=2, padding=1)
    assert y.shape == ref.shape
    cols = F.unfold(x, (3, 3), padding=1, stride=2)  # (N, 27, L)
    a = cols.transpose(1, 2).reshape(-1, 27)
    expect = gemm(a, w.reshape(4, 27).T, model).reshape(2, -1, 4).transpose(0, 2, 1).reshape(ref.shape)
    assert np.array_equal(y.numpy(), expect)
    assert torch.allclose(y, ref, rtol=1e-2, atol=1e-2)
    # groups, conv1d and the module, with gradients flowing
    conv = rt.Conv2d(4, 6, 3, padding=1, groups=2, accumulation=model).double()
    xx = rand(1, 4, 5, 5, seed=20).requires_grad_()
    out = conv(xx)
    assert torch.allclose(out, F.conv2d(xx, conv.weight, conv.bias, padding=1, groups=2), rtol=1e-2, atol=1e-2)
    out.sum().backward()
    assert xx.grad is not None and conv.weight.grad.shape == conv.weight.shape
    c1 = rt.Conv1d(3, 5, 4, stride=2, accumulation=model).double()
    s = rand(2, 3, 17, seed=21)
    assert torch.allclose(c1(s), F.conv1d(s, c1.weight, c1.bias, stride=2), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_padding_strings_are_atens_numbers(dims):
    # padding='same' / 'valid' (nn.Conv2d(padding='same'), common in users' models) were refused:
    # 'same' is d * (k - 1) per side pair, half each side, an odd total's extra entry by a zero pad of
    # the input's high side first, as ATen's _convolution_mode; the bits are those of that padding.
    model = "tc:h100:fp16:fp32"
    from rpsim.torch._conv import conv3d  # (emulate's F.conv3d; rpsim.torch exports conv1d and conv2d)
    conv, ref = {1: rt.conv1d, 2: rt.conv2d, 3: conv3d}[dims], getattr(F, f"conv{dims}d")
    x = rand(2, 3, *(7, 6, 5)[:dims], seed=22)
    for kernel, dilation in ((3, 1), (4, 1), (2, 3)):
        w = rand(4, 3, *(kernel,) * dims, seed=23)
        y = conv(x, w, None, padding="same", dilation=dilation, model=model)
        assert y.shape == ref(x, w, padding="same", dilation=dilation).shape == (2, 4, *x.shape[2:])
        total = dilation * (kernel - 1)
        padded = F.pad(x, (0, total % 2) * dims)
        assert torch.equal(y, conv(padded, w, None, padding=total // 2, dilation=dilation, model=model))
        assert torch.allclose(y, ref(x, w, padding="same", dilation=dilation), rtol=1e-2, atol=1e-2)
        assert torch.equal(conv(x, w, None, padding="valid", dilation=dilation, model=model),
                           conv(x, w, None, dilation=dilation, model=model))
    with pytest.raises(RuntimeError, match="Invalid padding string: 'full'"):
        conv(x, w, padding="full", model=model)
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided convolutions"):
        conv(x, w, padding="same", stride=2, model=model)


def test_a_same_padded_conv_module_trains_under_emulate():
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 4, padding="same"), torch.nn.ReLU(),
                              torch.nn.Flatten(),
                              torch.nn.Linear(4 * 36, 3))
    em = rt.emulate(net, "fp16-amp")
    net(torch.rand(2, 3, 6, 6)).sum().backward()
    assert "conv2d x1" in em.summary() and torch.isfinite(net[0].weight.grad).all()
    assert net[0].weight.grad.abs().sum() > 0


def test_col2im_reads_strided_float32_as_its_float64_copy():
    """The op core's col2im reads a float32 array at its own strides (rpsim.torch's gradient of F.unfold
    is a transposed view): the same sums as on its contiguous float64 copy, and F.fold's where every
    sum is exact (small integers)."""
    from rpsim import _core
    g = torch.Generator().manual_seed(5)
    lcols = torch.randint(-8, 9, (2, 7 * 5 * 3, 4 * 14), generator=g).float()  # (N, C*kh*kw, L) values
    view = lcols.transpose(1, 2).contiguous().transpose(1, 2)  # the same values, position-major in memory
    assert not view.is_contiguous()
    args = ((9, 14), 7, (5, 3), (1, 2), (1, 2), (2, 1))  # size, channels, kernel, dilation, padding, stride
    dx_view, _ = _core._col2im(view.numpy(), *args)
    dx_copy, _ = _core._col2im(view.numpy().astype("float64", order="C"), *args)
    assert np.array_equal(dx_view, dx_copy)
    fold = F.fold(lcols.double(), (9, 14), (5, 3), dilation=(1, 2), padding=(1, 2), stride=(2, 1))
    assert np.array_equal(dx_view, fold.numpy())
    with pytest.raises(ValueError, match=r"cols: expected \(N, 105, 56\), given \(N, 104, 56\)"):
        _core._col2im(view.numpy()[:, :-1], *args)


def test_im2col_is_f_unfold():
    """The op core's im2col (rpsim.torch's conv2d patches) is F.unfold's copy, bit for bit, float32 and
    float64, at padding, strides and dilations, on a channel slice of a larger tensor (not contiguous);
    a geometry with no output position and another dtype are named errors."""
    from rpsim import _core
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 7, 9, 11, generator=g)
    for geometry in [((3, 3), (1, 1), (1, 1), (1, 1)), ((5, 3), (1, 2), (1, 2), (2, 1)),
                     ((1, 1), (1, 1), (0, 0), (1, 1)), ((3, 3), (2, 3), (2, 2), (2, 3)), ((2, 4), (1, 1), (0, 3), (3, 1))]:
        kernel, dilation, padding, stride = geometry
        for t in (x, x.double(), x[:, 2:5]):
            want = F.unfold(t, kernel, dilation=dilation, padding=padding, stride=stride)
            got = _core._im2col(t.numpy(), kernel, dilation, padding, stride)
            assert got.dtype == t.numpy().dtype and got.shape == tuple(want.shape), geometry
            assert np.array_equal(got, want.numpy()), geometry
    with pytest.raises(ValueError, match="leave no output position"):
        _core._im2col(x.numpy(), (13, 3), (1, 1), (0, 0), (1, 1))
    with pytest.raises(TypeError, match="float32 or float64"):
        _core._im2col(x.half().numpy(), (3, 3), (1, 1), (1, 1), (1, 1))


def test_stochastic_models_are_keyed():
    a, b = rand(4, 64, seed=22), rand(64, 4, seed=23)
    m = "sequential:fp16:sr"
    same = rt.mm(a, b, m).numpy()
    assert np.array_equal(same, gemm(a, b, m))  # seed 0 stream 0: the model as given
    k1 = rt.mm(a, b, config=rt.GemmConfig(m, seed=1)).numpy()
    k2 = rt.mm(a, b, config=rt.GemmConfig(m, seed=2)).numpy()
    assert not np.array_equal(k1, k2)


def test_bad_input():
    with pytest.raises(ValueError, match="tc:h999"):
        rt.mm(rand(2, 2), rand(2, 2), "tc:h999:fp16:fp32")
    with pytest.raises(TypeError, match="float32, float64"):
        rt.mm(torch.ones(2, 2, dtype=torch.int32), rand(2, 2))
    with pytest.raises(ValueError, match="2-D"):
        rt.mm(rand(2, 2, 2), rand(2, 2))


def test_gemm_op_folds_a_strided_batch_as_its_reshaped_copy():
    """fold_a (conv2d's transposed im2col patches, N x L x K at strides) gives the bits of the same
    values as one contiguous (N * L) x K matrix, forward and backward, the raw dA and its masks too
    (dA handed back column-major, as conv2d asks); and col2im reads that raw dA (a column-major view)
    as its contiguous copy."""
    from rpsim import _core
    g = torch.Generator().manual_seed(7)
    cols = (torch.randn(3, 12, 10, generator=g) * 1e-3).float()  # (N, K, L): small, so fp16 flushes some
    a = cols.transpose(1, 2).numpy()  # (N, L, K) view
    b = (torch.randn(1, 12, 5, generator=g)).float().numpy()
    dy = (torch.randn(1, 30, 5, generator=g) * 1e-7).float().numpy()  # some flush in the fp16 casts
    results = []
    for fold in (True, False):
        op = _core._GemmOp.of_policy("fp16-amp", "conv2d")
        arg = a if fold else np.ascontiguousarray(a).reshape(1, 30, 12)
        d, saved = op.forward(arg, "binary32", b, float32=True, fold_a=fold)
        grads = op.backward(saved, dy, True, True, raw=True, masks=True, a_float32=True, b_float32=True,
                            a_column_major=fold)
        results.append((d, grads))
    (d1, g1), (d2, g2) = results
    assert d1.shape == (1, 30, 5) and np.array_equal(d1, d2)
    for key in ("da", "da_raw", "db", "da_flushed", "db_flushed", "dy_cast_flushed"):
        assert np.array_equal(g1[key], g2[key]), key
    assert g1["da_flushed"].any() and g1["dy_cast_flushed"].any()  # the masks compared are not all False
    raw = g1["da_raw"]
    assert not raw.flags.c_contiguous  # handed over as the GEMM's own column-major storage
    assert g1["da"].dtype == np.float32 and g1["da"][0].flags.f_contiguous  # a_column_major
    no_mask = _core._GemmOp.of_policy("fp16-amp", "conv2d")
    _, saved = no_mask.forward(a, "binary32", b, fold_a=True)
    assert no_mask.backward(saved, dy, True, True, masks=True, a_mask=False)["da_flushed"] is None
    args = ((1, 10), 12, (1, 1), (1, 1), (0, 0), (1, 1))  # a 1x10 image of 12 channels, 1x1 kernel
    da_cols = torch.from_numpy(g1["da"]).reshape(3, 10, 12).transpose(1, 2).numpy()
    raw_view = torch.from_numpy(raw).reshape(3, 10, 12).transpose(1, 2).numpy()
    dx1, m1 = _core._col2im(da_cols, *args, x_format="binary32", raw=raw_view)
    dx2, m2 = _core._col2im(np.ascontiguousarray(da_cols, dtype=np.float64), *args, x_format="binary32",
                            raw=np.ascontiguousarray(raw_view))
    assert np.array_equal(dx1, dx2) and np.array_equal(m1, m2) and m1.any()


def test_gemm_op_hands_db_back_in_a_column_major_bs_layout():
    """b_column_major (nn.Linear's weight.t()): dB and its flush mask come back in B's layout, the
    values of the C-ordered result, float32 and float64 alike (column_major: the forward's result); an emulated Linear's weight gradient
    then arrives contiguous, as plain PyTorch's does (nothing left for AccumulateGrad to copy)."""
    from rpsim import _core
    g = torch.Generator().manual_seed(5)
    a = (torch.randn(1, 6, 9, generator=g) * 1e-4).float().numpy()  # dB ~ 1e-8: fp16 flushes some
    w = (torch.randn(4, 9, generator=g)).float()
    dy = (torch.randn(1, 6, 4, generator=g) * 1e-4).float().numpy()
    for f32 in (True, False):
        out = []
        for cm in (True, False):
            op = _core._GemmOp.of_policy("fp16-pure", "linear")
            _, saved = op.forward(a, "binary16", w.t().unsqueeze(0).numpy(), float32=f32)
            out.append(op.backward(saved, dy, True, True, masks=True, b_float32=f32, b_column_major=cm))
        (g1, g2) = out
        assert g1["db"].dtype == (np.float32 if f32 else np.float64)
        assert g1["db"][0].flags.f_contiguous and g2["db"][0].flags.c_contiguous
        assert g1["db_flushed"][0].flags.f_contiguous and g1["db_flushed"].any()
        for key in ("da", "db", "db_flushed", "dy_cast_flushed"):
            assert np.array_equal(g1[key], g2[key]), key
    op = _core._GemmOp.of_policy("fp16-pure", "conv2d")  # a forward result over column-major storage
    d_cm, _ = op.forward(a, "binary16", w.t().unsqueeze(0).numpy(), float32=True, column_major=True)
    d_c, _ = op.forward(a, "binary16", w.t().unsqueeze(0).numpy(), float32=True)
    assert d_cm[0].flags.f_contiguous and d_c[0].flags.c_contiguous and np.array_equal(d_cm, d_c)
    lin, seen = torch.nn.Linear(9, 4), []
    rt.emulate(lin, "fp16-amp")
    lin.weight.register_hook(seen.append)  # the gradient as autograd hands it over, before AccumulateGrad
    lin(torch.from_numpy(a[0])).sum().backward()
    assert seen[0].is_contiguous()


class PerGroup(torch.nn.Module):
    """A grouped convolution as its module runs it (split=False), or written as its groups' own
    convolutions (groups=1 each, concatenated): what the op core's grouped GEMM must equal bit for
    bit. Both hold the conv as `conv`: the layer's name keys NVFP4's stochastic rounding."""

    def __init__(self, conv, split):
        super().__init__()
        self.conv, self.split = conv, split

    def forward(self, x):
        if not self.split:
            return self.conv(x)
        c, g = self.conv, self.conv.groups
        ci, co = c.in_channels // g, c.out_channels // g
        return torch.cat([F.conv2d(x[:, i * ci:(i + 1) * ci], c.weight[i * co:(i + 1) * co],
                                   None if c.bias is None else c.bias[i * co:(i + 1) * co], c.stride, c.padding,
                                   c.dilation) for i in range(g)], 1)


@pytest.mark.parametrize("policy", ["fp16-amp", "fp8-delayed", "mxfp8", "nvfp4"])
@pytest.mark.parametrize("groups,out,bias", [(2, 6, True), (8, 8, False), (4, 12, True)],
                         ids=["2_groups", "depthwise", "4_groups"])
def test_a_grouped_conv2d_is_its_groups_convolutions_bit_for_bit(policy, groups, out, bias):
    """One call of the op core's grouped GEMM (not one GEMM op per group from Python: a depthwise
    layer's hundreds took seconds) gives each group's own convolution: the output, and the input,
    weight and bias gradients."""
    torch.manual_seed(7)
    grouped, twin = (PerGroup(torch.nn.Conv2d(8, out, 3, padding=1, stride=2 if groups == 4 else 1, groups=groups,
                                              bias=bias), split) for split in (False, True))
    twin.conv.load_state_dict(grouped.conv.state_dict())
    rt.emulate(grouped, policy)
    rt.emulate(twin, policy)
    x1 = torch.randn(2, 8, 9, 9, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    y1, y2 = grouped(x1), twin(x2)
    assert torch.equal(y1, y2)
    g = torch.randn(y1.shape)
    y1.backward(g)
    y2.backward(g)
    c = grouped.conv
    assert torch.equal(x1.grad, x2.grad) and torch.equal(c.weight.grad, twin.conv.weight.grad)
    assert not bias or torch.equal(c.bias.grad, twin.conv.bias.grad)
    assert not torch.equal(y1, F.conv2d(x1, c.weight, c.bias, c.stride, 1, 1, groups))


def test_a_grouped_gemm_of_the_wrong_shapes_is_named():
    from rpsim import _core
    op = _core._GemmOp.of_policy("fp16-amp", "conv2d")
    a, b = np.ones((1, 5, 12)), np.ones((1, 4, 6))
    y, _ = op.forward(a, "binary32", b, groups=3)
    assert y.shape == (1, 5, 6) and (y == 4).all()
    with pytest.raises(ValueError, match=r"groups=5: A \(1, m, groups \* k\) and B \(1, k, groups \* n\)"):
        op.forward(a, "binary32", b, groups=5)
    with pytest.raises(ValueError, match="groups=3: the bias has 2 entries, B 6 columns"):
        op.forward(a, "binary32", b, np.ones((1, 2)), groups=3)


def test_a_convolutions_output_is_contiguous_and_a_batch_norm_after_it_thread_count_free():
    """The emulated conv2d returns (N, C, H, W) contiguous, as PyTorch's does: its channels-last view
    broke y.view(n, -1) and sent BatchNorm to ATen's channels-last kernel, whose sums depend on the
    thread count (the same conv + BatchNorm gave other bits with 2 threads than with 1)."""
    def run(threads):
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            torch.manual_seed(0)
            m = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3, bias=False), torch.nn.BatchNorm2d(64))
            rt.emulate(m, "fp16-pure")
            x = torch.randn(4, 3, 32, 32)
            y = m[0](x)
            assert y.is_contiguous() and y.view(4, -1).shape == (4, 64 * 30 * 30)
            out = m(x)
            out.backward(torch.randn(out.shape))
            return [out.detach()] + [p.grad for p in m.parameters()]
        finally:
            torch.set_num_threads(before)
    one, two = run(1), run(2)
    assert all(torch.equal(a, b) for a, b in zip(one, two))
