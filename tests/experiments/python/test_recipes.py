"""rpsim.quantize, rpsim.recipes, rpsim.recipe_check and rpsim.e8m0_cast: the recipe rows of
formats/recipe.hpp from Python, checked against the reference vectors (the excerpt in
tests/data/recipes, and ../shared/recipes when it is there), and the errors a user sees."""
import os
import pathlib

import numpy as np
import pytest
import rpsim

SOURCE = pathlib.Path(os.environ.get("RPSIM_SOURCE_DIR", pathlib.Path(__file__).parents[3]))
EXCERPTS = SOURCE / "tests" / "data" / "recipes"
SHARED = pathlib.Path(os.environ.get("RPSIM_SHARED_DIR", SOURCE.parent / "shared")) / "recipes"


def test_recipe_rows_and_their_options():
    rows = {r["name"]: r for r in rpsim.recipes()}
    assert list(rows) == ["te-nvfp4", "torchao-mx", "ocp-mx", "te-fp8-block", "te-fp8-current"]
    nv = {o["name"]: o for o in rows["te-nvfp4"]["options"]}
    assert nv["formula"]["default"] == "te-2026-03" and "te-2026-02" in nv["formula"]["values"]
    assert "d0067d0" in rows["te-nvfp4"]["reference"] and "aad3512" in rows["te-nvfp4"]["reference"]
    assert {o["name"] for o in rows["torchao-mx"]["options"]} == {"element", "block", "scale_rule"}


def test_quantize_returns_codes_scales_and_amax():
    x = np.zeros((2, 32), np.float32)
    x[0, 0], x[0, 1], x[1, 16] = 1.0, -0.5, 0.01
    q = rpsim.quantize(x, "te-nvfp4")
    assert q["codes"].shape == (2, 32) and q["codes"].dtype == np.uint8
    assert q["scale_codes"].shape == (2, 2) and q["amax"].tolist() == [1.0]
    assert q["codes"][0, :2].tolist() == [7, 13]  # 6 and -3 (x * 6 under the 448 scale)
    assert q["values"][0, 0] == pytest.approx(1.0, rel=1e-6)
    col = rpsim.quantize(x.T.copy(), "te-nvfp4", direction="columnwise")  # quantises x again
    assert (col["codes"] == q["codes"]).all()
    fp8 = rpsim.quantize(np.linspace(-3, 3, 256).reshape(1, 256), "te-fp8-block", pow2=True)
    assert fp8["scale_codes"] is None and fp8["amax"] is None and fp8["scales"].shape == (1, 2)
    assert fp8["scales"][0, 0] == 2.0**-7  # 448 / 3 = 149.3 -> 2^7, scale_inv 2^-7
    mx = rpsim.quantize(np.full((1, 32), 480.0), "torchao-mx", scale_rule="rceil")
    assert mx["scale_codes"].tolist() == [[128]] and mx["codes"][0, 0] == 0x77  # 240 under scale 2


def test_quantize_and_the_vector_files_agree_line_by_line():
    # The first case of the rowscaled excerpt, quantised through the Python API.
    path = EXCERPTS / "te-d0067d0__nvfp4__1x16.rowwise.rowscaled.txt"
    line = next(l for l in path.read_text().splitlines() if not l.startswith("#")).split()
    x = np.array([int(h, 16) for h in line[:64]], np.uint32).view(np.float32).reshape(2, 32)
    q = rpsim.quantize(x, "te-nvfp4", row_scaled=True)
    assert [int(h, 16) for h in line[64:128]] == q["codes"].ravel().tolist()
    assert [int(h, 16) for h in line[128:132]] == q["scale_codes"].ravel().tolist()
    assert np.array([int(h, 16) for h in line[132:134]], np.uint32).tolist() == q["amax"].view(np.uint32).tolist()


def test_recipe_check_on_the_excerpt():
    r = rpsim.recipe_check(str(EXCERPTS))
    assert len(r["files"]) >= 15 and r["failed"] == 0 and r["passed"] > 100
    assert all(f["passed"] > 0 and f["failed"] == 0 for f in r["files"])
    old = next(f for f in r["files"] if "aad3512" in f["file"])
    assert old["recipe"] == "te-nvfp4" and old["options"]["formula"] == "te-2026-02"


def test_recipe_check_on_the_shared_set():
    if not SHARED.is_dir():
        pytest.skip(f"no {SHARED} (the shared recipe vectors)")
    r = rpsim.recipe_check(str(SHARED))
    assert r["failed"] == 0 and r["passed"] > 0
    assert all(f["failed"] == 0 for f in r["files"])


def test_e8m0_casts():
    x = np.array([1.0, 1.5, 2.0**-127, np.inf, np.nan], np.float32)
    assert rpsim.e8m0_cast(x, "floor").tolist() == [127, 127, 0, 255, 255]
    assert rpsim.e8m0_cast(x, "ceil").tolist() == [127, 128, 1, 255, 255]
    assert rpsim.e8m0_cast(x, "rceil").tolist() == [127, 128, 0, 255, 255]


def test_bad_input_raises_named_errors():
    with pytest.raises(ValueError, match="unknown recipe 'nvfp4'"):
        rpsim.quantize(np.ones((1, 16)), "nvfp4")
    with pytest.raises(ValueError, match="unknown option 'formla'"):
        rpsim.quantize(np.ones((1, 16)), "te-nvfp4", formla="te-2026-02")
    with pytest.raises(ValueError, match="'1x32' is not one of 1x16|16x16"):
        rpsim.quantize(np.ones((1, 16)), "te-nvfp4", tile="1x32")
    with pytest.raises(TypeError, match="option pow2"):
        rpsim.quantize(np.ones((1, 16)), "te-fp8-block", pow2=[1])
    with pytest.raises(ValueError, match="multiple of 16"):
        rpsim.quantize(np.ones((8, 4)), "te-nvfp4", direction="columnwise", rht=True)
    with pytest.raises(ValueError, match="no such file"):
        rpsim.recipe_check(str(EXCERPTS / "missing.txt"))
    with pytest.raises(ValueError, match="E8M0 cast"):
        rpsim.e8m0_cast(np.ones(2), "round")


def test_quantize_and_recipe_effect_give_the_what_if_fractions():
    # 1, 1e-30, 2^-14 in one block (tests/experiments/cli/test_cli_grads_recipes.cpp works them out).
    x = np.zeros(32)
    x[0], x[1], x[2] = 1.0, 1e-30, 2.0**-14
    assert rpsim.recipe_effect(x, "mxfp8")["underflow"] == pytest.approx(1 / 3)
    nv = rpsim.recipe_effect(x, "nvfp4")
    assert nv["underflow"] == pytest.approx(2 / 3) and nv["saturated"] == 0 and nv["nonzero"] == 3
    assert rpsim.recipe_effect(x, "fp8-blockwise")["underflow"] == pytest.approx(1 / 3)
    q = rpsim.quantize(x.reshape(1, 32), "torchao-mx", element="e5m2")
    assert q["effect"]["underflow"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="does not block-scale"):
        rpsim.recipe_effect(x, "fp8")


def test_torch_block_quantize_takes_the_policy_recipe_object():
    # The recipe options reach rpsim.torch's quantiser through the fp8 object (480: floor scale 1,
    # rceil scale 2), and fp8-blockwise's operands fold per 128-long k tile in _torch_block_gemm.
    from rpsim import _core
    x = np.full((1, 32), 480.0)
    floor = _core._torch_block_quantize(x, "e4m3", {"scaling": "mx", "block_size": 32}, 1)
    rceil = _core._torch_block_quantize(x, "e4m3", {"scaling": "mx", "block_size": 32, "scale_rule": "rceil"}, 1)
    assert floor[3][0, 0] == 1.0 and rceil[3][0, 0] == 2.0
    with pytest.raises(ValueError, match="scale_rule"):
        _core._torch_block_quantize(x, "e4m3", {"scaling": "nvfp4", "block_size": 16, "scale_rule": "rceil"}, 1)
    recipe = _core._torch_policy("fp8-blockwise")["fp8"]
    a = np.linspace(-2, 3, 4 * 256).reshape(4, 256)
    b = np.linspace(1, -1, 256 * 3).reshape(256, 3)
    qa = _core._torch_block_quantize(a, "e4m3", recipe, 1)
    qb = _core._torch_block_quantize(b, "e4m3", recipe, 0, tiles=True)
    ref = rpsim.quantize(a, "te-fp8-block", pow2=True)
    assert (qa[0] == ref["values"]).all()
    d = _core._torch_block_gemm(qa[0][None], qa[3][None], "e4m3", qb[0][None], qb[3][None], "e4m3",
                                "sequential:fp32:rne", blockwise_block=128, b_tiles=True)[0]
    assert np.allclose(d, a @ b, rtol=0.05, atol=0.5)
