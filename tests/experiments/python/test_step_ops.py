"""The op core's step arithmetic from Python (experiments/python/bind_step_ops.cpp): unscale, the
gradient norm, clipping, accumulation and the telemetry's counts on NumPy arrays, read and written
where they lie; an array the op would write that is not the caller's own memory is refused before
anything is written."""
import numpy as np
import pytest

from rpsim import _core


def _grads():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s) * 1e-3 for s in [(5, 7), (600,), (3,)]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unscale_writes_each_gradient_in_place_as_its_format_rounds(dtype):
    grads = [g.astype(dtype) for g in _grads()]
    before = [g.copy() for g in grads]
    inv = float(np.float32(1 / 3072.0))  # binary32(1 / scale): torch.cuda.amp's reciprocal
    flushed, found = _core._unscale(grads, 3072.0, ["binary32", "binary16", "bfloat16"])
    for g, b, fmt in zip(grads, before, ["binary32", "binary16", "bfloat16"]):
        want = _core.round(b.astype(np.float64) * inv, fmt)  # the binary64 product, rounded once
        assert np.array_equal(g.astype(np.float64), want.astype(dtype).astype(np.float64))
    assert found is False and len(flushed) == 3


@pytest.mark.parametrize("scale", [65536.0, 3.0, 2.0 ** -100, 1e30])
def test_unscale_of_float32_to_binary32_is_the_rounded_binary64_product(scale):
    # (float32's own multiply on that path: the same bits as the binary64 product rounded once, over
    # subnormals, overflow, zeros of both signs, infinities and NaN; the counts likewise.)
    rng = np.random.default_rng(1)
    with np.errstate(over="ignore"):
        g = (rng.standard_normal(20000) * np.exp2(rng.integers(-160, 130, 20000))).astype(np.float32)
    g[:10] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38, -3.4e38, 1.17e-38]
    before = g.astype(np.float64)
    inv = _core.round(np.array([1 / scale]), "binary32")[0]  # binary32(1 / scale)
    (flushed,), found = _core._unscale([g], scale, ["binary32"])
    want = _core.round(before * inv, "binary32")
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(g), nan)
    assert np.array_equal(g[~nan].view(np.uint32), want[~nan].astype(np.float32).view(np.uint32))
    assert flushed == np.count_nonzero((before != 0) & (want == 0)) and found is True


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unscale_masks_are_the_nonzero_entries_it_flushed_in_each_gradients_shape(dtype):
    # (rpsim.torch.Trainer's underflow columns: the masks replace a compare of every gradient before
    # and after in torch. Each path: binary32 by float's multiply, narrower formats in chunks, scale 1.)
    rng = np.random.default_rng(2)
    grads = [(rng.standard_normal(s) * np.exp2(rng.integers(-40, 5, s))).astype(dtype)
             for s in [(30, 50), (1300,), (2, 3, 4)]]
    grads[0][0, :5] = [0.0, -0.0, np.nan, np.inf, 1e-30]
    before = [g.copy() for g in grads]
    flushed, found, masks = _core._unscale(grads, 65536.0, ["binary32", "binary16", "bfloat16"], masks=True)
    assert found is True  # the inf
    for g, b, m, n in zip(grads, before, masks, flushed):
        assert m.dtype == np.bool_ and m.shape == g.shape
        assert np.array_equal(m, (b != 0) & (g == 0)) and m.sum() == n
    assert flushed[1] > 0  # a binary16 gradient the unscale flushed: the case the masks are for
    _, _, (ones,) = _core._unscale([np.ones((2, 2), dtype)], 1.0, ["binary16"], masks=True)
    assert ones.shape == (2, 2) and not ones.any()
    assert len(_core._unscale([np.ones(2, dtype)], 2.0, ["binary16"])) == 2  # no masks unless asked for


def test_unscale_refuses_an_array_it_cannot_write_before_writing_any():
    grads = [g.astype(np.float32) for g in _grads()]
    before = [g.copy() for g in grads]
    strided = np.ones((4, 6), np.float32)[:, ::2]
    with pytest.raises(TypeError, match="gradient 3: written in place.*strided"):
        _core._unscale(grads + [strided], 2.0, ["binary32"] * 4)
    assert all(np.array_equal(g, b) for g, b in zip(grads, before))  # none half-unscaled
    frozen = np.ones(3)
    frozen.setflags(write=False)
    with pytest.raises(TypeError, match="gradient 0: .*read-only"):
        _core._unscale([frozen], 2.0, ["binary32"])
    assert _core._unscale([frozen], 1.0, ["binary32"]) == ([0], False)  # scale 1 only reads
    with pytest.raises(TypeError, match="sum: written in place"):
        _core._accumulate_gradients([np.ones((4, 6))[:, ::2]], [np.ones((4, 3))], ["binary32"], True)
    with pytest.raises(TypeError, match="gradient: written in place"):
        _core._scale_gradients([np.ones((4, 6))[:, ::2]], 0.5, ["binary32"])


def test_unscale_reports_nonfinite_and_keeps_the_nan():
    g = np.array([1.0, np.nan, 2.0], np.float32)
    _, found = _core._unscale([g], 4.0, ["binary32"])
    assert found is True and np.isnan(g[1]) and g[0] == 0.25


def test_the_gradient_norm_reads_float32_and_float64_alike():
    grads = _grads()
    n64 = _core._grad_norm(grads, "binary32")
    n32 = _core._grad_norm([g.astype(np.float32).astype(np.float64) for g in grads], "binary32")
    assert _core._grad_norm([g.astype(np.float32) for g in grads], "binary32") == n32
    assert n64 == pytest.approx(float(np.sqrt(sum((g ** 2).sum() for g in grads))), rel=1e-6)


def test_the_gradient_norm_of_float32_in_binary32_is_the_sequential_chain():
    # clip_grad_norm_'s norm as rpsim train sums it: each square rounded to binary32, each tensor's
    # squares added in order in binary32 (past a chunk of 512), the tensors' sums likewise, the square
    # root rounded; written here in NumPy's float32 scalars, one operation at a time.
    rng = np.random.default_rng(2)
    grads = [(rng.standard_normal(n) * np.exp2(rng.integers(-80, 20, n))).astype(np.float32)
             for n in (1500, 7, 1)]
    total = np.float32(0)
    for g in grads:
        s = np.float32(0)
        for x in g:
            s = np.float32(s + np.float32(np.float64(x) * np.float64(x)))
        total = np.float32(total + s)
    assert _core._grad_norm(grads, "binary32") == float(np.float32(np.sqrt(np.float64(total))))
    with np.errstate(over="ignore"):
        assert np.isinf(_core._grad_norm([np.array([3e38, 1.0], np.float32)], "binary32"))
    assert np.isnan(_core._grad_norm([np.array([np.nan, 1.0], np.float32)], "binary32"))


def test_the_counts_and_their_errors():
    x = np.array([1.0, np.inf, np.nan, -np.inf, 0.0])
    assert _core._count_nonfinite(x) == 3 and _core._count_nonfinite(x.astype(np.float32)) == 3
    assert _core._count_nonfinite(x[1::2]) == 2  # strided: read through a copy
    ref = np.array([1.0, 2.0, 0.0, np.inf, 5.0])
    emu = np.array([0.0, -0.0, 0.0, 0.0, 5.0])
    assert _core._count_zero_vs(emu, ref) == 2 and _core._count_zero_vs(emu.astype(np.float32), ref) == 2
    with pytest.raises(ValueError, match="emulated holds 5 entries, reference 4"):
        _core._count_zero_vs(emu, ref[:4])
    grad = np.array([0.0, 1.0, np.nan, -3.0, 2.0], dtype=np.float32)  # the Trainer's update-stalled count
    before = np.array([1.0, 2.0, 3.0, 4.0, np.nan], dtype=np.float32)
    after = np.array([1.0, 2.0, 3.0, 5.0, np.nan], dtype=np.float32)  # entries 1 and 2 stalled
    assert _core._count_stalled(grad, after, before) == 2
    assert _core._count_stalled(grad.astype(np.float64), after, before) == 2
    assert _core._count_stalled(grad, after, before.astype(np.float64)) == 2
    with pytest.raises(ValueError, match="grad holds 5 entries, after 4, before 4"):
        _core._count_stalled(grad, after[:4], before[:4])
