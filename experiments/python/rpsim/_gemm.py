"""rpsim.gemm_check: a GPU's GEMM checked bit for bit against a model, as `rpsim gemm-check`."""
from . import _core, _gemm_manifest


class GemmCheckResult:
    """passed / failed / total: elements of D equal (or not) to the model's, encoding for encoding
    (any NaN equals any NaN, -0 differs from +0); max_ulps, mean_ulps: |model - D| in ulps of the
    model's output format; mismatches: the first `show` in row-major order, each {'row', 'col',
    'given' (the dump's D), 'model', 'ulps'}; model_D: the model's whole result; model, schedule
    (the concrete schedule a preset chose for this shape, '' otherwise), output_format."""

    def __init__(self, raw):
        self.__dict__.update(raw)

    @property
    def ok(self):
        return self.failed == 0

    def __bool__(self):
        return self.ok

    def __repr__(self):
        sched = f", schedule {self.schedule}" if self.schedule else ""
        return (f"<rpsim.GemmCheckResult {self.model}{sched}: {self.passed}/{self.total} bit-exact, "
                f"max {self.max_ulps:.4g} ulps of {self.output_format}>")


def gemm_check(A, B=None, D=None, model=None, C=None, *, show=10, threads=1):
    """Check D (what a GPU returned for A B [+ C]) against `model` bit for bit, as `rpsim gemm-check`.

    A, B, D, C: 2-D arrays (float16, float32 or float64 holding values of the model's input and
    output formats: bf16 and FP8 as exact float32), or instead of A a dump file (.npz with A, B, D
    [, C]) or a list of .npy files, as dump_gemm.py writes them. model: a kernel preset
    ('cublas:h100:fp16:fp32'), a schedule ('kernel:...') or any `rpsim gemm` model, as a string
    or a dict. Values not of the model's formats raise ValueError naming the array and element.
    Returns a GemmCheckResult (truthy when every element matches).

    A alone as a rpsim.torch.capture_gemms directory (or its manifest.json): every GEMM in it,
    as `rpsim gemm-check DIR`; model then may be a list; returns a ManifestCheckResult."""
    if B is None and D is None and C is None and _gemm_manifest.is_manifest(A):
        return _gemm_manifest.check_manifest(A, model, show, threads)
    return GemmCheckResult(_core._gemm_check(A, B, D, model, C, show, threads))
