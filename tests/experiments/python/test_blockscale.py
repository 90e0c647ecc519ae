"""rpsim.mx_quantize / rpsim.nvfp4_quantize: the C++ block quantisation (formats/block_scale.hpp)
through the module, on values worked out by hand from OCP MX v1.0 Sec. 6.3 and NVIDIA's NVFP4
recipe, and the errors a user sees."""
import numpy as np
import pytest
import rpsim


def test_mx_e2m1_two_rows_of_two_blocks():
    # Row 0, block 0: amax 6.5 -> floor(log2) 2 = emax(e2m1) -> scale 1 (E8M0 127); 6.5 saturates
    # to 6, 0.3 -> 0.5, -3.2 -> -3. Block 1: amax 0.1 -> floor(log2 0.1) = -4 -> scale 2^-6
    # (E8M0 121); 0.1*64 = 6.4 -> 6, 0.02*64 = 1.28 -> 1.5.
    x = np.array([[6.5, 0.3, -3.2, 0.0, 0.1, 0.02, 0.0, 0.0],
                  [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    q = rpsim.mx_quantize(x, "e2m1", block=4)
    assert q["elements"].shape == x.shape
    assert q["scales"].shape == (2, 2) and q["scale_codes"].dtype == np.uint8
    assert q["elements"][0].tolist() == [6.0, 0.5, -3.0, 0.0, 6.0, 1.5, 0.0, 0.0]
    assert q["scale_codes"].tolist() == [[127, 121], [0, 0]]
    assert q["scales"][0, 1] == 2.0**-6


def test_mx_e4m3_saturates_instead_of_nan():
    q = rpsim.mx_quantize(np.array([500.0, -300.0]), "e4m3", block=32)
    assert q["elements"].tolist() == [448.0, -288.0]


def test_nvfp4_scales_under_the_tensor_scale():
    # Tensor amax 1 -> s_enc = 6*448 = 2688; block 0 (amax 1): E4M3 448 (code 0x7e), x*6;
    # block 1 (amax 0.01): 4.48 -> E4M3 4.5 (code 0x49).
    x = np.zeros(32)
    x[0], x[1], x[16] = 1.0, 0.5, 0.01
    q = rpsim.nvfp4_quantize(x)
    assert q["scale_codes"].tolist() == [0x7E, 0x49]
    assert q["elements"][[0, 1, 16]].tolist() == [6.0, 3.0, 6.0]
    assert q["tensor_scale"] == 1.0 / 2688.0
    back = q["elements"] * np.repeat(q["scales"], 16) * q["tensor_scale"]
    assert back[0] == pytest.approx(1.0)


def test_bad_input_raises_named_errors():
    with pytest.raises(ValueError, match="not an OCP MX element format"):
        rpsim.mx_quantize(np.ones(4), "binary16")
    with pytest.raises(ValueError, match="block"):
        rpsim.nvfp4_quantize(np.ones(4), block=0)
    with pytest.raises(ValueError):
        rpsim.mx_quantize(np.ones(4), "no-such-format")
    with pytest.raises(TypeError):
        rpsim.mx_quantize(np.array(["a"]), "e4m3")
