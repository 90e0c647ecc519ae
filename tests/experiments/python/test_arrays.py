"""The GEMM op's array carriers (experiments/python/arrays.cpp): NumPy batches at any strides into the
core's column-major binary64 matrices and back (copy_tiled, in tiles of 16), checked through A I = A,
which every accumulation computes exactly, at shapes that are not multiples of a tile."""
import numpy as np
import pytest

from rpsim import _core

SHAPES = [(1, 1), (1, 5), (5, 1), (16, 16), (17, 33), (37, 19), (130, 7)]


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    # Nonzero, distinct, and of every magnitude: a lost or swapped entry changes the result.
    x = rng.uniform(1, 2, shape) * np.exp2(rng.integers(-30, 30, shape)) * rng.choice([-1, 1], shape)
    return x.astype(dtype)


def _views(a):
    """a (batch, m, k) as itself, as a transposed view's transpose (column-major items) and as a
    strided slice of a larger array."""
    big = np.zeros((a.shape[0], 2 * a.shape[1], 3 * a.shape[2]), a.dtype)
    big[:, ::2, ::3] = a
    return {"c": a, "f": np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1), "strided": big[:, ::2, ::3]}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k", SHAPES)
def test_identity_product_returns_the_operand_at_any_layout(dtype, m, k):
    op = _core._GemmOp.of_model(model="sequential:binary64:rne")
    a = _values((3, m, k), dtype, m * 100 + k)
    eye = np.broadcast_to(np.eye(k, dtype=dtype), (3, k, k))
    for name, view in _views(a).items():
        for f32 in (False, True):
            d, _ = op.forward(view, "binary64", np.ascontiguousarray(eye), float32=f32)
            assert d.shape == a.shape, name
            assert d.dtype == (np.float32 if f32 else np.float64), name
            assert np.array_equal(d, a.astype(d.dtype)), (name, f32)


@pytest.mark.parametrize("m,k", SHAPES)
def test_folded_batch_is_one_matrix_of_the_items_rows(m, k):
    op = _core._GemmOp.of_model(model="sequential:binary64:rne")
    a = _values((4, m, k), np.float32, m + 7 * k)
    eye = np.eye(k, dtype=np.float32)[None]
    for name, view in _views(a).items():
        d, _ = op.forward(view, "binary64", eye, fold_a=True)
        assert d.shape == (1, 4 * m, k), name
        assert np.array_equal(d[0], a.reshape(4 * m, k).astype(np.float64)), name


def test_backward_gradients_come_back_in_row_major_order():
    """dA = dY B^T and dB = A^T dY with B = I and A = I: dA is dY, dB is dY (tiled copies out)."""
    op = _core._GemmOp.of_model(model="sequential:binary64:rne")
    n = 37
    eye = np.eye(n)[None]
    _, saved = op.forward(eye, "binary64", eye)
    dy = _values((1, n, n), np.float64, 5)
    g = op.backward(saved, dy, True, True, a_float32=True)
    assert g["da"].dtype == np.float32 and np.array_equal(g["da"], dy.astype(np.float32))
    assert g["db"].dtype == np.float64 and np.array_equal(g["db"], dy)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("m,k", SHAPES)
def test_gemm_arguments_and_result_at_any_layout(dtype, m, k):
    """rpsim.gemm's 2-D carriers (matrix_arg in, to_numpy out, one tiled pass each): A I = A for a
    C-contiguous, column-major and strided A, and I A^T's transpose = A from the other side."""
    import rpsim
    a = _values((m, k), np.float64, m * 10 + k)
    if dtype == np.float16:  # float16's own values: the carrier widens them exactly
        a = np.clip(a, -60000, 60000)
    a = a.astype(dtype)
    for name, view in ((n, v[0]) for n, v in _views(a[None]).items()):
        d = rpsim.gemm(view, np.eye(k), model="sequential:binary64:rne")
        assert d.dtype == np.float64 and d.flags.c_contiguous, name
        assert np.array_equal(d, a.astype(np.float64)), name
        dt = rpsim.gemm(np.eye(k), view.T, model="sequential:binary64:rne")
        assert np.array_equal(dt, a.astype(np.float64).T), name
