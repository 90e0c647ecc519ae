"""experiments/python/dump_gemm.py as a script (a README command, issue #36): on a machine without
a CUDA device (Debian's torch 1.13 here) it checks its arguments and says that no CUDA device is
there, instead of AssertionError: Unknown attribute allow_bf16_reduced_precision_reduction (a flag
torch 1.13 lacks) before any CUDA check. The dump itself is checked on a GPU machine
(tests/experiments/cli/test_cli_gemm_check.cpp reads what dump_gemm() writes)."""
import subprocess
import sys

import pytest


def dump(source_dir, tmp_path, *args):
    return subprocess.run([sys.executable, str(source_dir / "experiments" / "python" / "dump_gemm.py"), *args],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_usage_and_argument_checks(source_dir, tmp_path):
    r = dump(source_dir, tmp_path, "--help")
    assert r.returncode == 0 and "usage: dump_gemm.py" in r.stdout and "--rpr" in r.stdout
    r = dump(source_dir, tmp_path, "out.npz", "--k", "0")
    assert r.returncode == 2 and "--k 0: must be at least 1" in r.stderr
    r = dump(source_dir, tmp_path, "nowhere/out.npz")
    assert r.returncode == 2 and "nowhere/out.npz: the folder" in r.stderr and "does not exist" in r.stderr


def test_no_cuda_device_is_said_without_a_traceback(source_dir, tmp_path):
    try:
        import torch
    except ImportError:
        r = dump(source_dir, tmp_path, "out.npz")
        assert r.returncode == 2 and "PyTorch is not installed" in r.stderr
        return
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the script would dump for real")
    r = dump(source_dir, tmp_path, "out.npz", "--input", "bf16", "--rpr", "1")
    assert r.returncode == 2, r.stderr
    assert "dump_gemm.py: error: no CUDA device: torch " in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out.npz").exists()
    if not hasattr(torch, "float8_e4m3fn"):
        r = dump(source_dir, tmp_path, "out.npz", "--input", "e4m3")
        assert "--input e4m3 needs torch.float8_e4m3fn and torch._scaled_mm" in r.stderr
