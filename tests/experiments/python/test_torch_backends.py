"""rpsim.torch.backends() and the CUDA backend's Python plumbing (rpsim._core._cuda_*), on a machine
with or without a GPU: the CPU is always there; CUDA is `built` exactly when this build tree compiled
the backend with nvcc, and `available` only with a device. Bad arguments raise ValueError before the
device is looked for; without a device a good call raises RuntimeError("... no CUDA device ..."),
never crashes (the pointers below are fake device addresses no kernel reads)."""
import os
import pathlib
import re

import pytest

torch = pytest.importorskip("torch")
import rpsim  # noqa: E402
import rpsim.torch as rt  # noqa: E402
from rpsim import _core  # noqa: E402


def _build_has_cuda():
    """Whether this build tree configured the CUDA path (its CMakeCache), independently of the module."""
    binary = os.environ.get("RPSIM_BINARY")
    if not binary:
        pytest.skip("RPSIM_BINARY not set (ctest sets it): the build tree is unknown")
    build = pathlib.Path(binary).resolve().parent
    cache = build / "CMakeCache.txt"
    if not cache.exists():
        pytest.skip(f"no {cache}")
    enabled = re.search(r"^RPSIM_CUDA:BOOL=(\w+)$", cache.read_text(), re.M)
    # CMake records the CUDA compiler it enabled in CMakeFiles/<version>/CMakeCUDACompiler.cmake.
    found = any(re.search(r'set\(CMAKE_CUDA_COMPILER "[^"]+"\)', p.read_text())
                for p in build.glob("CMakeFiles/*/CMakeCUDACompiler.cmake"))
    return bool(enabled and enabled.group(1) in ("ON", "TRUE", "1") and found)


def test_backends_names_cpu_and_cuda():
    b = rt.backends()
    assert set(b) == {"cpu", "cuda"}
    assert b["cpu"] == {"built": True, "available": True}
    assert set(b["cuda"]) == {"built", "available"}
    assert b["cuda"]["built"] is _build_has_cuda()
    assert b["cuda"]["available"] is (b["cuda"]["built"] and _core._cuda_device_count() > 0)
    if not b["cuda"]["built"]:
        assert b["cuda"]["available"] is False


def test_cuda_calls_check_arguments_then_the_device():
    if not rt.backends()["cuda"]["built"]:
        with pytest.raises(RuntimeError, match="without a CUDA compiler"):
            _core._cuda_round("bf16", 4096, "float32", 8192, "float32", 4)
        pytest.skip("rpsim was built without the CUDA backend: only the refusal is checked")
    assert "100-real" in _core._cuda_architectures()
    with pytest.raises(ValueError, match="fp17"):
        _core._cuda_round("fp17", 4096, "float32", 8192, "float32", 4)
    with pytest.raises(ValueError, match="float16"):
        _core._cuda_round("bf16", 4096, "float16", 8192, "float32", 4)
    with pytest.raises(ValueError, match="A's columns must equal B's rows"):
        _core._cuda_gemm("tc:h100:fp16:fp32", (4096, "float32", 4, 8, 8, 1), (8192, "float32", 7, 3, 3, 1), None,
                         (16384, "float32", 4, 3, 3, 1))
    with pytest.raises(NotImplementedError, match="not on the CUDA backend"):
        _core._cuda_gemm("pairwise:fp32:rne", (4096, "float32", 4, 8, 8, 1), (8192, "float32", 8, 3, 3, 1), None,
                         (16384, "float32", 4, 3, 3, 1))
    if rt.backends()["cuda"]["available"]:
        pytest.skip("a CUDA device is present: the no-device refusals are not taken")
    with pytest.raises(RuntimeError, match="no CUDA device"):
        _core._cuda_round("bf16", 4096, "float32", 8192, "float32", 4, rounding="sr", seed=3)
    with pytest.raises(RuntimeError, match="no CUDA device"):
        _core._cuda_gemm("cublas:h100:bf16:bf16", (4096, "float32", 4, 8, 8, 1), (8192, "float32", 8, 3, 3, 1),
                         None, (16384, "float32", 4, 3, 3, 1))
    with pytest.raises(RuntimeError, match="no CUDA device"):
        _core._cuda_amax(4096, "float32", 16, 8192)
    assert rpsim  # the package imported beside rpsim.torch
