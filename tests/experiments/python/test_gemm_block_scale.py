"""rpsim.gemm with block scales (sfa, sfb, block, scale_format) and _scaled_mm-style scales
(scale_a, scale_b), and `rpsim gemm` / `gemm-check` on a dump carrying SFA and SFB: the same
instruction model as tc-validate (tests/sim/validation/test_gemm_block_scale.cpp checks it against
MMA-Sim's vectors), the errors a user sees."""
import re

import numpy as np
import pytest
import rpsim

MX = "tc:b200:e4m3:fp32:tcgen05.mma"


def mx_operands(seed, m=4, n=3, k=96):
    """A quantised along its rows and B along its columns in MX e4m3 blocks of 32."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)) * 10, rng.standard_normal((k, n)) / 10
    qa, qb = rpsim.mx_quantize(a, "e4m3", block=32), rpsim.mx_quantize(b.T, "e4m3", block=32)
    return qa["elements"], qb["elements"].T, qa["scales"], qb["scales"].T


def test_scales_of_one_are_the_unscaled_instruction():
    a, b, _, _ = mx_operands(1)
    ones_a, ones_b = np.ones((4, 3)), np.ones((3, 3))
    d = rpsim.gemm(a, b, model=MX, sfa=ones_a, sfb=ones_b, scale_format="ue8m0", block=32)
    assert np.array_equal(d, rpsim.gemm(a, b, model=MX))


def test_block_scales_dequantise_mx_operands():
    """With MX scales the result is the unscaled GEMM of the dequantised operands up to the
    instruction's rounding: within a few binary32 ulps of it, and exact for power-of-two scales
    the same for every block of a row."""
    a, b, sa, sb = mx_operands(2)
    d = rpsim.gemm(a, b, model=MX + ":scale=ue8m0", sfa=sa, sfb=sb)
    exact = (a * np.repeat(sa, 32, axis=1)) @ (b * np.repeat(sb, 32, axis=0))
    assert np.allclose(d, exact, rtol=1e-5, atol=0)
    assert not np.array_equal(d, rpsim.gemm(a, b, model=MX))
    # scale_format= and block= name the same model as the spec's scale= and scale_block=.
    assert np.array_equal(d, rpsim.gemm(a, b, model=MX, sfa=sa, sfb=sb, scale_format="ue8m0", block=32))


def test_scaled_mm_scales_per_tensor_and_per_row():
    a, b, _, _ = mx_operands(3)
    ab = rpsim.gemm(a, b, model="tc:h100:e4m3:fp32:wgmma")
    rows = np.array([0.5, 2.0, 3.0, np.float32(0.1)])
    d = rpsim.gemm(a, b, model="tc:h100:e4m3:fp32:wgmma", scale_a=rows, scale_b=1.5)
    want = (rows.astype(np.float32)[:, None] * np.float32(1.5)) * ab.astype(np.float32)
    assert np.array_equal(d, want.astype(np.float64))


U8 = dict(scale_format="ue8m0")


@pytest.mark.parametrize("kwargs, message", [
    (dict(U8, sfa=np.ones((4, 2)), sfb=np.ones((3, 3))), "SFA: expected 4x3 (M x K/32), given 4x2"),
    (dict(U8, sfa=np.ones((4, 3)), sfb=np.ones((3, 2))), "SFB: expected 3x3 (K/32 x N), given 3x2"),
    (dict(U8, sfa=np.ones((4, 3))), "SFB: model"),
    (dict(U8, sfa=np.full((4, 3), 3.0), sfb=np.ones((3, 3))), "SFA[0, 0] = 3 is not a value of the scale format"),
    (dict(sfa=np.ones((4, 3)), sfb=np.ones((3, 3)), scale_format="ue4m3"), "with ue4m3 block scales"),
    (dict(U8, sfa=np.ones((4, 6)), sfb=np.ones((6, 3)), block=16), "scale_block 16 is not 32"),
    (dict(sfa=np.ones((4, 3)), sfb=np.ones((3, 3))), "takes no block scales"),
    (dict(scale_a=np.ones(5)), "scale_a: expected 1x1 (per tensor) or 4x1 (per row of A), given 5x1"),
])
def test_bad_scales_raise_value_error_naming_the_argument(kwargs, message):
    a, b, _, _ = mx_operands(4)
    with pytest.raises(ValueError, match=re.escape(message)):
        rpsim.gemm(a, b, model=MX, **kwargs)


def test_k_not_a_multiple_of_the_block():
    a, b, _, _ = mx_operands(5, k=48)
    with pytest.raises(ValueError, match="K: 48 is not a multiple of the block 32"):
        rpsim.gemm(a, b, model=MX + ":scale=ue8m0", sfa=np.ones((4, 1)), sfb=np.ones((1, 3)))


def test_cli_gemm_dump_with_block_scales_passes_gemm_check_and_a_changed_element_fails(run_cli, tmp_path):
    spec = "tc:b200:e2m1:fp32:tcgen05.mma:scale=ue4m3"
    dump = tmp_path / "nvfp4.npz"
    r = run_cli("gemm", "--model", spec, "--m", "6", "--n", "5", "--k", "128", "--dump", str(dump))
    assert "max_error_ulps" in r.stdout
    with np.load(dump) as z:
        arrays = {k: z[k] for k in z.files}
    assert arrays["SFA"].shape == (6, 8) and arrays["SFB"].shape == (8, 5)
    ok = run_cli("gemm-check", str(dump), "--model", spec)
    assert "30/30" in ok.stdout
    # The same through the module, and one element of D moved by one binary32 ulp.
    assert rpsim.gemm_check(str(dump), model=spec).failed == 0
    arrays["D"] = arrays["D"].copy()
    arrays["D"][2, 3] = np.nextafter(np.float32(arrays["D"][2, 3]), np.float32(np.inf))
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    r = run_cli("gemm-check", str(bad), "--model", spec, check=False)
    assert r.returncode != 0 and "29/30" in r.stdout
    res = rpsim.gemm_check(str(bad), model=spec)
    assert res.failed == 1 and (res.mismatches[0]["row"], res.mismatches[0]["col"]) == (2, 3)
    # Without the scales the model cannot run: exit 2 naming the array.
    del arrays["SFB"]
    np.savez(tmp_path / "nosfb.npz", **arrays)
    r = run_cli("gemm-check", str(tmp_path / "nosfb.npz"), "--model", spec, check=False)
    assert r.returncode == 2 and "SFB" in r.stderr


def test_gemm_check_on_arrays_takes_the_scales():
    a, b, sa, sb = mx_operands(6)
    spec = MX + ":scale=ue8m0"
    d = rpsim.gemm(a, b, model=spec, sfa=sa, sfb=sb).astype(np.float32)
    assert rpsim.gemm_check(a, b, d, model=spec, sfa=sa, sfb=sb).failed == 0
    sa2 = sa.copy()
    sa2[1, 2] *= 2
    res = rpsim.gemm_check(a, b, d, model=spec, sfa=sa2, sfb=sb)
    assert res.failed > 0 and {m["row"] for m in res.mismatches} == {1}
    with pytest.raises(ValueError, match="SFA: model"):
        rpsim.gemm_check(a, b, d, model=spec, sfb=sb)
