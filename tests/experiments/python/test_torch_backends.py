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


def test_quantize_routes_a_cuda_tensor_to_the_backend_with_the_cpu_calls_keys(monkeypatch):
    # rpsim.torch.quantize on a CUDA tensor calls rpsim_cuda_round on its storage. No GPU here: a fake
    # backend that reads the pointers as host memory and rounds with the CPU core stands in for the
    # device, so what is checked is the routing (pointers, element count, dtypes, seed, stream, ftz,
    # daz, saturate, stochastic_bits): the CPU call's bits, forward and backward. (The device's own
    # bits against the CPU's: experiments/bench/gpu_backend_check.py, owed to a GPU.)
    import ctypes
    import numpy as np
    from rpsim.torch import _quantize
    calls = []

    def fake_round(fmt, in_ptr, in_dtype, out_ptr, out_dtype, n, stream, rounding, seed, stream_id, ftz, daz,
                   overflow, stochastic_bits, first_index=0, nan_policy=""):
        calls.append((fmt, in_dtype, n, stream, rounding, seed, stream_id))
        ct = ctypes.c_double if in_dtype == "float64" else ctypes.c_float
        src = np.ctypeslib.as_array((ct * n).from_address(in_ptr))
        dst = np.ctypeslib.as_array((ct * n).from_address(out_ptr))
        saturate = None if overflow == "" else overflow == "saturate"
        _core.round(src, fmt, rounding, seed=seed, stream=stream_id, out=dst, ftz=ftz, daz=daz,
                    saturate=saturate, stochastic_bits=stochastic_bits or 32)

    class FakeStream:
        cuda_stream = 12345

    class AsIfCuda(torch.Tensor):  # a CPU tensor the routing takes for a CUDA one
        is_cuda = True
        is_cpu = False

    monkeypatch.setattr(_core, "_cuda_round", fake_round)
    monkeypatch.setattr(_quantize, "_cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: FakeStream())
    x = torch.randn(1000, dtype=torch.float64) * 300
    for fmt, mode, kw in (("binary16", "rne", {}), ("bfloat16", "sr", {"seed": 3, "stream": 9}),
                          ("e4m3", "rne", {"saturate": True}), ("e5m2", "rtz", {"ftz": True, "daz": True}),
                          ("e2m1", "sr", {"stochastic_bits": 8, "seed": 1})):
        for dtype in (torch.float64, torch.float32):
            calls.clear()
            xd = x.to(dtype)
            cpu = xd.clone().requires_grad_()
            dev = xd.clone().as_subclass(AsIfCuda).requires_grad_()
            back = dict(kw, backward_format="e5m2", backward_rounding="sr")
            a, b = rt.quantize(cpu, fmt, mode, **back), rt.quantize(dev, fmt, mode, **back)
            g = torch.linspace(-3, 3, 1000, dtype=dtype)
            a.backward(g)
            b.backward(g.as_subclass(AsIfCuda))  # (on a GPU the incoming gradient is on the device)
            assert torch.equal(a.detach(), torch.Tensor(b.detach())), (fmt, mode, dtype)
            assert torch.equal(cpu.grad, torch.Tensor(dev.grad)), (fmt, mode, dtype)
            name = "float64" if dtype == torch.float64 else "float32"
            seed, stream = kw.get("seed", 0), kw.get("stream", 0)
            assert calls == [(fmt, name, 1000, 12345, mode, seed, stream),
                             ("e5m2", name, 1000, 12345, "sr", seed, stream + 1)]


def test_quantize_names_a_device_it_cannot_round_on():
    x = torch.empty(4, device="meta")
    with pytest.raises(TypeError, match=r"x: a tensor on meta; rpsim.torch emulates on the CPU"):
        rt.quantize(x, "binary16")
