"""rpsim.torch.quantize: the core's array rounding as an autograd function (issue #27)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
rpsim = pytest.importorskip("rpsim")
rt = pytest.importorskip("rpsim.torch")


@pytest.fixture
def x():
    g = torch.Generator().manual_seed(1)
    return torch.randn(64, 33, generator=g, dtype=torch.float64) * 3


@pytest.mark.parametrize("fmt", ["binary16", "bf16", "e4m3", "e5m2", "e2m1", "e5m10", "tf32",
                                 "exp=5,man=10,bias=15,subnormals=no"])
@pytest.mark.parametrize("rounding", ["rne", "rtz", "ru", "rd", "rna", "rodd"])
def test_forward_equals_rpsim_round(x, fmt, rounding):
    for dtype in (torch.float64, torch.float32):
        t = x.to(dtype)
        assert np.array_equal(rt.quantize(t, fmt, rounding).numpy(), rpsim.round(t.numpy(), fmt, rounding),
                              equal_nan=True)


def test_fixed_point_and_stochastic_rounding_keyed_as_the_core(x):
    for fmt in ("q16.14", "fixed:8:4", "word=12,frac=3"):
        assert np.array_equal(rt.quantize(x, fmt).numpy(), rpsim.round(x.numpy(), fmt), equal_nan=True)
    a = rt.quantize(x, "binary16", "sr", seed=7, stream=3).numpy()
    assert np.array_equal(a, rpsim.round(x.numpy(), "binary16", "sr", seed=7, stream=3))
    # Element i draws counter_random(seed, stream, i), as round_scalar(index=i) does.
    flat = x.reshape(-1)
    for i in (0, 5, 100):
        assert a.reshape(-1)[i] == rpsim.round_scalar(float(flat[i]), "binary16", "sr", seed=7, stream=3,
                                                      index=i)["value"]
    assert not np.array_equal(a, rt.quantize(x, "binary16", "sr", seed=8, stream=3).numpy())


def test_no_copy_of_a_contiguous_input_and_views_are_read_in_order(x):
    t = x.clone()
    before = t.data_ptr()
    q = rt.quantize(t, "bf16")
    assert t.data_ptr() == before and q.data_ptr() != before
    tt = x.t()  # not contiguous: rounded element for element all the same
    assert torch.equal(rt.quantize(tt, "bf16"), rt.quantize(tt.contiguous(), "bf16"))


def test_half_and_bfloat16_inputs_keep_their_dtype():
    t = torch.tensor([1.0, 1.0 + 2 ** -9, 3.3], dtype=torch.float16)
    q = rt.quantize(t, "e4m3")
    assert q.dtype == torch.float16
    assert q.float().tolist() == rpsim.round(t.float().numpy(), "e4m3").tolist()
    assert rt.quantize(t.bfloat16(), "e5m2").dtype == torch.bfloat16


def test_gradient_straight_through_or_rounded(x):
    t = x.clone().requires_grad_()
    g = torch.full_like(x, 1 + 2 ** -20)
    rt.quantize(t, "binary16").backward(g)
    assert torch.equal(t.grad, g)
    t.grad = None
    rt.quantize(t, "binary16", backward_format="bf16").backward(g)
    assert torch.equal(t.grad, torch.ones_like(x))
    t.grad = None
    rt.quantize(t, "binary16", backward_format="bf16", backward_rounding="ru").backward(g)
    assert torch.equal(t.grad, torch.full_like(x, 1 + 2 ** -7))


@pytest.mark.parametrize("kwargs, word", [({"format": "binary17"}, "binary17"),
                                          ({"format": "binary16", "rounding": "nearest-ish"}, "nearest-ish"),
                                          ({"format": "binary16", "backward_format": "fp99"}, "fp99")])
def test_bad_names_raise_value_error_naming_them(x, kwargs, word):
    with pytest.raises(ValueError, match=word):
        rt.quantize(x, **kwargs)


def test_bad_tensors_raise_type_error_saying_what_is_accepted(x):
    with pytest.raises(TypeError, match="float32, float64"):
        rt.quantize(torch.arange(4), "binary16")
    with pytest.raises(TypeError, match="torch.Tensor"):
        rt.quantize(np.ones(3), "binary16")
    if torch.cuda.is_available():
        with pytest.raises(TypeError, match="cuda"):
            rt.quantize(x.cuda(), "binary16")
    else:
        meta = torch.empty(3, device="meta")
        with pytest.raises(TypeError, match="CPU"):
            rt.quantize(meta, "binary16")
