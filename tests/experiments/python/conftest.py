"""Shared set-up of the Python module's tests: ctest runs each file with PYTHONPATH at the
build tree's python/ folder, RPSIM_BINARY at the rpsim command and RPSIM_SHARED_DIR at the
read-only oracle data (../shared beside the checkout)."""
import os
import pathlib
import subprocess

import pytest


@pytest.fixture(scope="session")
def rpsim_binary():
    path = os.environ.get("RPSIM_BINARY")
    if not path or not pathlib.Path(path).exists():
        pytest.skip("RPSIM_BINARY not set (ctest sets it to the rpsim command)")
    return path


@pytest.fixture(scope="session")
def run_cli(rpsim_binary):
    def run(*args, check=True):
        r = subprocess.run([rpsim_binary, *args], capture_output=True, text=True, timeout=600)
        if check and r.returncode != 0:
            raise AssertionError(f"rpsim {' '.join(args)} exited {r.returncode}: {r.stderr}")
        return r
    return run


@pytest.fixture(scope="session")
def source_dir():
    return pathlib.Path(os.environ.get("RPSIM_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[3]))


@pytest.fixture(scope="session")
def shared_dir(source_dir):
    path = pathlib.Path(os.environ.get("RPSIM_SHARED_DIR", source_dir.parent / "shared"))
    if not path.is_dir():
        pytest.skip(f"shared oracle data not found at {path} (set RPSIM_SHARED_DIR)")
    return path
