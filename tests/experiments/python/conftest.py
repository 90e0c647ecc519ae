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


class _CliPair:
    """One config through rpsim.torch and through `rpsim train` (the byte-identity tests of issue #27):
    run() takes the case's changes (a "base" config name, the keys to change), returns the torch
    Trainer and the CLI's result; same_csvs() asserts steps.csv, histograms.csv and evaluations.csv
    are the same bytes."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path

    def run(self, configs, case, changes, load, through_torch):
        import rpsim
        changes = dict(changes)
        base = changes.pop("base", case)
        if not (configs / f"{base}.json").exists():
            pytest.skip(f"{base}.json is not shipped")
        cfg = load(base, **changes)
        return through_torch(cfg), rpsim._core._train(cfg, [], str(self.tmp_path), 0, False)

    def same_csvs(self, t, ref):
        assert t.steps_csv == ref["steps_csv"]
        assert t.histograms_csv == ref["histograms_csv"]
        assert t.evaluations_csv() == (self.tmp_path / "evaluations.csv").read_text()


@pytest.fixture
def cli_pair(tmp_path):
    return _CliPair(tmp_path)


@pytest.fixture
def as_model():
    """as_model(fn): an nn.Module whose forward is fn(*inputs), so that rpsim.torch.emulate takes a
    torch function alone (skipped without PyTorch)."""
    torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")

    class Call(torch.nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, *xs):
            return self.fn(*xs)
    return Call


@pytest.fixture
def is_torchs_under_fp32():
    """is_torchs_under_fp32(m, x, grad_atol=None): m(x) emulated under fp32 has torch's shape, and its
    value and the gradients of the sum of its squares (x's and every parameter's) are within 1e-5
    of torch's (gradients: within grad_atol, or 1e-5 of each gradient's largest magnitude); the
    Emulation."""
    torch = pytest.importorskip("torch", reason="python3-torch is not installed: rpsim.torch is not tested")
    rt = pytest.importorskip("rpsim.torch")

    def check(m, x, grad_atol=None):
        want = m(x)
        want.square().sum().backward()
        grads = [t.grad.clone() for t in (x, *m.parameters())]
        x.grad = None
        m.zero_grad()
        e = rt.emulate(m, "fp32")
        got = m(x)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        got.square().sum().backward()
        for t, g in zip((x, *m.parameters()), grads):
            atol = grad_atol if grad_atol is not None else 1e-5 * g.abs().max().item()
            torch.testing.assert_close(t.grad, g, rtol=1e-5, atol=atol)
        return e
    return check
