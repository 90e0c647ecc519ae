"""rpsim.gemm_check: a GPU's GEMM checked bit for bit against a model, as `rpsim gemm-check`."""
from . import _core, _gemm_manifest
from ._result import CheckResult


class GemmCheckResult(CheckResult):
    """passed / failed / total: elements of D equal (or not) to the model's, encoding for encoding
    (any NaN equals any NaN, -0 differs from +0); max_ulps, mean_ulps: |model - D| in ulps of the
    model's output format; mismatches: the first `show` in row-major order, each {'row', 'col',
    'dump' (the dump's D), 'model' (the model's), 'ulps' (model - dump)}, the names the CLI's
    mismatch lines use; model_D: the model's whole result; model, schedule
    (the concrete schedule a preset chose for this shape, '' otherwise), output_format."""

    def __repr__(self):
        sched = f", schedule {self.schedule}" if self.schedule else ""
        return (f"<rpsim.GemmCheckResult {self.model}{sched}: {self.passed}/{self.total} bit-exact, "
                f"max {self.max_ulps:.4g} ulps of {self.output_format}>")


class GemmInferResult(CheckResult):
    """What `rpsim gemm-check --infer` reports: ranked, the candidates (kernel schedules and plain
    models) best first: by bit-exact elements, then max and mean ulps of output_format; each a
    dict {'model' (a spec for gemm_check(model=...)), 'note' (conditions of a plain model: K in
    decreasing order, inputs rounded to tf32, the sum rounded to the output format), 'passed',
    'total', 'max_ulps', 'mean_ulps', 'equivalents'}. exact: those reproducing every element
    (empty when none does); presets: named kernel presets reproducing it; candidates: how many
    were screened."""

    def __init__(self, raw):
        super().__init__(raw)
        self.ranked = raw["exact"] if raw["exact"] else raw["best"]

    @property
    def ok(self):
        return bool(self.exact)

    def __repr__(self):
        top = self.ranked[0] if self.ranked else None
        best = f"{top['model']} {top['passed']}/{top['total']}" if top else "none"
        return f"<rpsim.GemmInferResult best {best}, {len(self.exact)} reproducing>"


def gemm_check(A, B=None, D=None, model=None, C=None, *, show=10, threads=1, infer=False, top=5,
               sfa=None, sfb=None, scale_a=None, scale_b=None):
    """Check D (what a GPU returned for A B [+ C]) against `model` bit for bit, as `rpsim gemm-check`.

    A, B, D, C: 2-D arrays (float16, float32 or float64 holding values of the model's input and
    output formats: bf16 and FP8 as exact float32), or instead of A a dump file (.npz with A, B, D
    [, C]) or a list of .npy files, as dump_gemm.py writes them. model: a kernel preset
    ('cublas:h100:fp16:fp32'), a schedule ('kernel:...') or any `rpsim gemm` model, as a string
    or a dict. Values not of the model's formats raise ValueError naming the array and element.
    Returns a GemmCheckResult (truthy when every element matches).

    sfa, sfb, scale_a, scale_b: block scales and _scaled_mm scales as rpsim.gemm takes them (a
    block-scaled model such as 'tc:b200:e4m3:fp32:tcgen05.mma:scale=ue8m0' needs sfa and sfb); a
    dump file may carry them as arrays SFA, SFB, scale_a, scale_b instead.

    A alone as a rpsim.torch.capture_gemms directory (or its manifest.json): every GEMM in it,
    as `rpsim gemm-check DIR`; model then may be a list; returns a ManifestCheckResult.

    infer=True (without model): search the kernel schedules and plain accumulation models that
    reproduce D, as `rpsim gemm-check --infer`; returns a GemmInferResult (truthy when one
    reproduces every element), `top` candidates listed when none does."""
    if B is None and D is None and C is None and _gemm_manifest.is_manifest(A):
        return _gemm_manifest.check_manifest(A, model, show, threads)
    if infer:
        if model is not None:
            raise ValueError("gemm_check: give model=... or infer=True, not both")
        if not isinstance(top, int) or isinstance(top, bool) or top < 1:
            raise ValueError(f"gemm_check: top = {top!r}: expected an integer >= 1")
        return GemmInferResult(_core._gemm_infer(A, B, D, C, top, threads))
    return GemmCheckResult(_core._gemm_check(A, B, D, model, C, show, threads, sfa, sfb, scale_a, scale_b))
