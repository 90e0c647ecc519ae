"""rpsim.gemm_check: the shared H100 cuBLAS dumps under their presets (arrays and files), a D one
ulp off found where it is, the same counts as `rpsim gemm-check`, and the errors a user sees."""
import re

import numpy as np
import pytest
import rpsim

PRESETS = {
    "fp16_fp32": "cublas:h100:fp16:fp32",
    "fp16_fp16_red0": "cublas:h100:fp16:fp16:rpr=0",
    "fp16_fp16_red1": "cublas:h100:fp16:fp16:rpr=1",
    "bf16_bf16_red0": "cublas:h100:bf16:bf16:rpr=0",
    "bf16_bf16_red1": "cublas:h100:bf16:bf16:rpr=1",
    "tf32_fp32": "cublas:h100:tf32:fp32",
    "e4m3_float32": "cublas:h100:e4m3:fp32",
    "e4m3_bfloat16": "cublas:h100:e4m3:bf16",
}


@pytest.fixture(scope="module")
def cublas(shared_dir):
    path = shared_dir / "cublas-h100"
    if not path.is_dir():
        pytest.skip(f"{path} not found")
    return path


@pytest.mark.parametrize("kind", sorted(PRESETS))
def test_small_cublas_dumps_are_bit_exact_under_their_presets(cublas, kind):
    d = np.load(cublas / f"s1_64x64x256_{kind}.npz")
    r = rpsim.gemm_check(d["A"], d["B"], d["D"], model=PRESETS[kind])
    assert r.ok and r.passed == r.total == 64 * 64 and r.failed == 0 and r.mismatches == []
    assert r.max_ulps == 0 and r.model_D.shape == (64, 64)
    assert np.array_equal(r.model_D, d["D"].astype(np.float64))


def test_a_dump_file_and_its_schedule(cublas):
    r = rpsim.gemm_check(str(cublas / "s1_128x128x4096_fp16_fp32.npz"), model="cublas:h100:fp16:fp32")
    assert r.ok and r.total == 128 * 128
    assert r.schedule  # the preset names the split it chose for this shape
    assert "16384/16384" in repr(r)


def test_one_ulp_off_is_found_where_it_is(cublas):
    d = np.load(cublas / "s1_64x64x256_fp16_fp32.npz")
    D = d["D"].copy()
    D[5, 7] = np.nextafter(D[5, 7], np.float32(np.inf))
    r = rpsim.gemm_check(d["A"], d["B"], D, model="cublas:h100:fp16:fp32")
    assert not r and r.failed == 1 and r.passed == r.total - 1
    (m,) = r.mismatches
    assert (m["row"], m["col"]) == (5, 7) and m["dump"] == float(D[5, 7]) and m["ulps"] == -1.0
    assert r.max_ulps == 1.0


def test_the_same_counts_as_the_cli(cublas, run_cli):
    path = cublas / "s1_64x64x256_fp16_fp32.npz"
    model = "sequential:binary32:rne"  # not what cuBLAS does: many elements differ
    r = rpsim.gemm_check(str(path), model=model, show=3)
    out = run_cli("gemm-check", str(path), "--model", model, check=False)
    assert out.returncode == 1
    passed, failed = map(int, re.search(r"(\d+) passed, (\d+) failed", out.stdout).groups())
    assert (r.passed, r.failed) == (passed, failed) and failed > 0
    assert len(r.mismatches) == 3


@pytest.mark.parametrize("call, error, names", [
    (lambda: rpsim.gemm_check(np.full((2, 3), 0.1), np.ones((3, 2)), np.ones((2, 2)),
                              model="cublas:h100:fp16:fp32"), ValueError, "A"),
    (lambda: rpsim.gemm_check(np.ones((2, 3)), np.ones((2, 2)), np.ones((2, 2)), model="exact"), ValueError, "B is 2x2"),
    (lambda: rpsim.gemm_check(np.ones((2, 2)), np.ones((2, 2)), np.ones((3, 2)), model="exact"), ValueError, "D is 3x2"),
    (lambda: rpsim.gemm_check(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), model="cublas:h900"), ValueError, "h900"),
    (lambda: rpsim.gemm_check(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2))), ValueError, "model"),
    (lambda: rpsim.gemm_check("/nonexistent/run.npz", model="exact"), (ValueError, OSError), "/nonexistent/run.npz"),
    (lambda: rpsim.gemm_check(np.ones((2, 2), np.int32), np.ones((2, 2)), np.ones((2, 2)), model="exact"), TypeError, "int32"),
    (lambda: rpsim.gemm_check(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), model="exact", threads=0), ValueError, "threads"),
])
def test_bad_input_raises_naming_it(call, error, names):
    with pytest.raises(error, match=names):
        call()
