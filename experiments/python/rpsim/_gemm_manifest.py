"""rpsim.gemm_check on a rpsim.torch.capture_gemms directory: every captured GEMM checked under
the model its device and flags select (or one given), as `rpsim gemm-check DIR`."""
import os

from . import _core
from ._result import CheckResult


def is_manifest(path):
    """True for a capture directory (holding manifest.json) or a manifest.json path."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    path = os.fspath(path)
    return os.path.isfile(os.path.join(path, "manifest.json")) or os.path.basename(path) == "manifest.json"


class ManifestCheckResult(CheckResult):
    """rows: one per captured op call, each {'call', 'op', 'shape', 'dtype', 'model', 'note',
    'gemms', 'passed', 'total' (elements), 'max_ulps'}; mismatches: the first `show` lines naming
    file, element, D and the model's value; passed / failed: op calls; skipped and skip_reasons:
    the GEMMs the capture or the check left out, and why; table: what `rpsim gemm-check DIR`
    prints."""

    def __str__(self):
        return self.table

    def __repr__(self):
        return f"<rpsim.ManifestCheckResult {self.passed} passed, {self.failed} failed, {self.skipped} not checked>"


def check_manifest(path, model=None, show=10, threads=1):
    """model: None (the model recorded at capture, else the preset of each GEMM's device and
    flags), a spec string, or a list of specs (each GEMM takes the first whose input and output
    formats are its dtypes')."""
    models = [] if model is None else [model] if isinstance(model, str) else list(model)
    for m in models:
        if not isinstance(m, str):
            raise TypeError(f"gemm_check on a manifest: model must be a spec string or a list of them, not {m!r}")
    return ManifestCheckResult(_core._gemm_check_manifest(os.fspath(path), models, show, threads))
