"""The Python module's OpenMP threads (issue #36): they sleep while they wait (libgomp's default
spinning made the default thread count 5x slower than one thread beside other processes), the
OMP_WAIT_POLICY the module sets for that is gone once libgomp has read it, and a call's `threads`
holds for that call only (experiments/bench/bench_threads.py alternates the two in one process)."""
import os
import subprocess
import sys

import rpsim

SMALL = {"name": "py-threads", "model": {"type": "mlp", "hidden": [8]},
         "data": {"name": "synthetic", "synthetic_train_size": 64, "synthetic_test_size": 32},
         "optimizer": {"type": "sgd", "lr": 0.05}, "batch_size": 16, "steps": 1}


def imported_with(**env):
    """(stdout, stderr) of a fresh interpreter importing rpsim under OMP_DISPLAY_ENV=verbose."""
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = "import os, rpsim; print('after import:', os.environ.get('OMP_WAIT_POLICY'))"
    r = subprocess.run([sys.executable, "-c", code], env=dict(clean, OMP_DISPLAY_ENV="verbose", **env),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


def test_openmp_threads_wait_passively_and_the_environment_is_left_as_it_was():
    out, err = imported_with()
    if "GOMP_SPINCOUNT" not in err:
        import pytest
        pytest.skip("the OpenMP runtime is not libgomp (no GOMP_SPINCOUNT under OMP_DISPLAY_ENV)")
    assert "GOMP_SPINCOUNT = '0'" in err  # libgomp's default: 300000 spins
    assert "after import: None" in out
    out, err = imported_with(OMP_WAIT_POLICY="active")  # the user's choice stands
    assert "GOMP_SPINCOUNT = '30000000000'" in err and "after import: active" in out


def test_threads_holds_for_its_call_only():
    default = rpsim.train(SMALL, as_frame=False).meta["threads"]
    assert rpsim.train(SMALL, threads=default + 1, as_frame=False).meta["threads"] == default + 1
    assert rpsim.train(SMALL, as_frame=False).meta["threads"] == default
