"""experiments/bench/gpu_backend_check.py, the CUDA backend's GPU checks: it compiles, and on a machine
without a CUDA device (or without the backend or PyTorch) it checks nothing and says so with exit
status 77, never a pass."""
import os
import pathlib
import py_compile
import subprocess
import sys

import pytest


def script(source_dir):
    return pathlib.Path(source_dir) / "experiments" / "bench" / "gpu_backend_check.py"


def test_the_script_compiles(source_dir, tmp_path):
    py_compile.compile(str(script(source_dir)), cfile=str(tmp_path / "check.pyc"), doraise=True)


def test_without_a_device_it_checks_nothing_and_says_why(source_dir, tmp_path):
    from rpsim import _core
    if _core._cuda_device_count() > 0:
        pytest.skip("a CUDA device is present: the script would run its checks")
    r = subprocess.run([sys.executable, str(script(source_dir)), "--quick", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert r.returncode == 77, r.stdout + r.stderr
    assert "nothing checked" in r.stderr
    assert any(why in r.stderr for why in ("no CUDA device", "built without the CUDA backend", "no PyTorch"))
    assert not (tmp_path / "report.json").exists()
