"""rpsim.round / encode / decode: values, dtypes, layouts, in-place output, threads and the
errors a user sees."""
import numpy as np
import pytest
import rpsim


def bits64(a):
    return np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)


def test_round_to_binary16_matches_known_values():
    x = np.array([0.1, 1.0, 65504.0, 65520.0, -1e-8, 2.0**-24, 1e6])
    got = rpsim.round(x, "binary16")
    # 0.1 -> 0x2E66 = 1638/16384; 65520 is the tie above 65504 and rounds to infinity;
    # 2^-24 is the smallest subnormal; -1e-8 is below half of it and rounds to -0.
    want = np.array([1638 / 16384, 1.0, 65504.0, np.inf, -0.0, 2.0**-24, np.inf])
    assert np.array_equal(bits64(got), bits64(want))
    assert got.dtype == np.float64 and got.shape == x.shape


def test_encode_decode_round_trip_every_binary16_encoding():
    bits = np.arange(1 << 16, dtype=np.uint16)
    values = rpsim.decode(bits, "binary16")
    finite = np.isfinite(values)
    assert np.array_equal(rpsim.encode(values[finite], "binary16"), bits[finite])
    assert rpsim.encode(values, "fp16").dtype == np.uint16


def test_encode_dtype_follows_the_format_width():
    x = np.array([1.5, -2.0])
    assert rpsim.encode(x, "e4m3").dtype == np.uint8
    assert rpsim.encode(x, "e2m1").dtype == np.uint8
    assert rpsim.encode(x, "tf32").dtype == np.uint32
    assert rpsim.encode(x, "binary64").dtype == np.uint64
    assert list(rpsim.encode(x, "e4m3")) == [0x3C, 0xC0]  # 1.5 = 0 0111 100, -2 = 1 1000 000


def test_float32_input_gives_float32_and_float16_is_widened():
    x32 = np.array([0.1, 3.0e38, -7.0], dtype=np.float32)
    got = rpsim.round(x32, "bfloat16")
    assert got.dtype == np.float32
    assert np.array_equal(got, rpsim.round(x32.astype(np.float64), "bfloat16").astype(np.float32))
    x16 = np.array([0.1, 2.5], dtype=np.float16)
    assert rpsim.round(x16, "e4m3").dtype == np.float32


def test_shapes_scalars_and_non_contiguous_input():
    x = np.random.default_rng(1).normal(size=(4, 6))
    assert rpsim.round(x, "e5m2").shape == (4, 6)
    strided = x[:, ::2]  # not contiguous: read through a copy
    assert np.array_equal(rpsim.round(strided, "e5m2"), rpsim.round(strided.copy(), "e5m2"))
    assert np.array_equal(rpsim.round(x.T, "e5m2"), rpsim.round(x, "e5m2").T)
    scalar = rpsim.round(0.1, "bf16")
    assert np.ndim(scalar) == 0 and scalar == 0.10009765625
    assert rpsim.round([0.1, 0.2], "bf16").shape == (2,)
    assert rpsim.round(np.empty(0), "fp16").shape == (0,)


def test_out_writes_in_place_without_a_copy():
    x = np.linspace(-3, 3, 1001)
    want = rpsim.round(x, "e4m3")
    out = np.empty_like(x)
    assert rpsim.round(x, "e4m3", out=out) is out
    assert np.array_equal(out, want)
    assert rpsim.round(x, "e4m3", out=x) is x  # in place
    assert np.array_equal(x, want)


def test_stochastic_rounding_is_keyed_by_seed_and_index_not_threads():
    x = np.full(300_000, 1.0 + 2.0**-9)  # a quarter of bf16's spacing above 1
    a = rpsim.round(x, "bf16", "sr", seed=5, threads=1)
    b = rpsim.round(x, "bf16", "sr", seed=5, threads=2)
    c = rpsim.round(x, "bf16", "sr", seed=6, threads=2)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    up = np.mean(a > 1.0)
    assert abs(up - 0.25) < 0.01  # P(up) = 1/4; 300k draws: sigma 0.0008
    # stream and the element index are both part of the key
    assert not np.array_equal(a, rpsim.round(x, "bf16", "sr", seed=5, stream=1))


def test_saturate_ftz_and_daz():
    x = np.array([1e6, -1e6, 2.0**-20, 2.0**-16])
    assert np.isnan(rpsim.round(x, "e4m3")[:2]).all()  # E4M3FN overflows to NaN by default
    assert list(rpsim.round(x, "e4m3", saturate=True)[:2]) == [448.0, -448.0]
    assert np.isinf(rpsim.round(x, "fp16")[:2]).all()
    assert list(rpsim.round(x, "fp16", saturate=True)[:2]) == [65504.0, -65504.0]
    assert rpsim.round(x, "fp16")[3] == 2.0**-16  # subnormal in binary16
    assert rpsim.round(x, "fp16", ftz=True)[3] == 0.0
    assert rpsim.round(x, "binary32", daz=False)[2] == 2.0**-20
    tiny = np.array([1e-310])  # a binary64 subnormal input
    assert rpsim.round(tiny, "binary64", daz=True)[0] == 0.0


def test_custom_format_specs():
    x = np.array([1.0 + 2.0**-11, 3.0])
    assert np.array_equal(rpsim.round(x, "e5m10"), rpsim.round(x, "binary16"))
    spec = "exp=5,man=10,bias=15,subnormals=no"
    assert rpsim.round(np.array([2.0**-20]), spec)[0] == 0.0


def test_decode_accepts_any_integer_dtype_and_float32_output():
    assert rpsim.decode([0x3C00, 0xC000], "fp16").tolist() == [1.0, -2.0]
    out = rpsim.decode(np.array([0x7E, 0x01], dtype=np.int64), "e4m3", dtype=np.float32)
    assert out.dtype == np.float32 and out.tolist() == [448.0, 2.0**-9]
    assert np.isnan(rpsim.decode(np.uint8(0x7F), "e4m3"))


@pytest.mark.parametrize("call, error, names", [
    (lambda: rpsim.round([1.0], "fp17"), ValueError, "fp17"),
    (lambda: rpsim.round([1.0], "e0m3"), ValueError, "e0m3"),
    (lambda: rpsim.round([1.0], "fp16", "rnz"), ValueError, "rnz"),
    (lambda: rpsim.encode([1.0], "exp=5,man=2,colour=red"), ValueError, "colour"),
    (lambda: rpsim.round([1.0], "fp16", "sr", stochastic_bits=0), ValueError, "stochastic_bits"),
    (lambda: rpsim.round([1.0], "fp16", threads=-1), ValueError, "threads"),
    (lambda: rpsim.round([1.0], "fp16", saturate="yes"), TypeError, "saturate"),
    (lambda: rpsim.round(np.arange(3), "fp16"), TypeError, "int64"),
    (lambda: rpsim.round(np.array([1 + 2j]), "fp16"), TypeError, "complex128"),
    (lambda: rpsim.round(np.array(["a"]), "fp16"), TypeError, "<U1"),
    (lambda: rpsim.round(["a"], "fp16"), TypeError, "list"),
    (lambda: rpsim.round(np.ones(3, np.float32), "binary64"), ValueError, "binary64"),
    (lambda: rpsim.round(np.ones(3), "fp16", out=np.ones(3, np.float32)), TypeError, "out"),
    (lambda: rpsim.round(np.ones(3), "fp16", out=np.ones(4)), ValueError, "shape"),
    (lambda: rpsim.decode(np.array([1.0]), "fp16"), TypeError, "float64"),
    (lambda: rpsim.decode([300], "e4m3"), ValueError, "300"),
    (lambda: rpsim.decode([-1], "e4m3"), ValueError, "-1"),
    (lambda: rpsim.decode(np.array([16], np.uint8), "e2m1"), ValueError, "e2m1"),
    (lambda: rpsim.decode([1], "binary64", dtype=np.float32), ValueError, "binary64"),
    (lambda: rpsim.decode([1], "fp16", dtype=np.int32), TypeError, "int32"),
])
def test_bad_input_raises_naming_it(call, error, names):
    with pytest.raises(error, match=names.replace("(", r"\(").replace("+", r"\+")):
        call()


def test_read_only_input_is_fine_and_read_only_out_is_refused():
    x = np.linspace(0, 1, 10)
    x.flags.writeable = False
    assert rpsim.round(x, "fp16").shape == (10,)
    with pytest.raises(ValueError, match="read-only"):
        rpsim.round(np.ones(3), "fp16", out=x[:3])
