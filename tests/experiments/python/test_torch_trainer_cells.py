"""rpsim.torch.Trainer's per-layer steps.csv cells (rpsim/torch/_trainer_cells.py) on what the op core
computes for them: the weight distance to the FP64 shadow read from a layer's parameters in pieces."""
import numpy as np
import pytest

pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
_core = pytest.importorskip("rpsim._core")


def test_rel_distance_reads_a_layers_pieces_in_order():
    """steps.csv's weight_rel_distance_from_fp64, the op core's: a layer's parameters as a sequence of
    arrays, each read in C order (a transposed view's rows), give the bits of their concatenation, and
    NumPy's |e - s| / |s| to rounding; different entry counts and a non-numeric piece are named errors."""
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal(5)
    sw, sb = w.astype(np.float64) + 1e-3 * rng.standard_normal((5, 7)), b + 1e-3
    e = np.concatenate([w.T.reshape(-1).astype(np.float64), b])
    s = np.concatenate([sw.T.reshape(-1), sb])
    pieces = _core._torch_rel_distance([w.T, b], [sw.T, sb])
    assert pieces == _core._torch_rel_distance([e], [s])
    assert pieces == pytest.approx(np.linalg.norm(e - s) / np.linalg.norm(s), rel=1e-12)
    assert pieces > 0
    with pytest.raises(ValueError, match="35 emulated entries, 40 shadow"):
        _core._torch_rel_distance([w.T], [sw.T, sb])
    with pytest.raises(TypeError, match="shadow: a sequence of float arrays"):
        _core._torch_rel_distance([w], [sw, "x"])

