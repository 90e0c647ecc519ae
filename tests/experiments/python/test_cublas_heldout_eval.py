"""sim/accumulation/fit/cublas_heldout_eval.py, issue #40's scoring of a held-out capture, without a GPU: a
capture folder made from the H200 fit excerpt (tests/data/cublas-h200-fit: 59 GEMMs with cuBLASLt's
heuristic answer and the kernels they launched) is scored through build/sim/cublas_fit_eval: every GEMM
bit-exact from its record; without the records (the preset's guess) some are not, so the score can fail."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(os.environ.get("RPSIM_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[3]))
SCRIPT = ROOT / "sim" / "accumulation" / "fit" / "cublas_heldout_eval.py"
EXCERPT = ROOT / "tests" / "data" / "cublas-h200-fit" / "cases.json"


def evaluator():
    path = pathlib.Path(os.environ["RPSIM_BINARY"]).parent / "sim" / "cublas_fit_eval"
    if not path.exists():
        pytest.fail(f"{path} is missing: it is built with rpsim (ninja cublas_fit_eval)")
    return path


def capture(tmp_path, drop_records=False):
    """The excerpt as the capture script writes it: NAME.json (cases) and NAME.npz (d{i}: 3 x 8 x 8)."""
    cases = json.loads(EXCERPT.read_text())["cases"]
    blocks = {f"d{c['i']}": np.array(c["d"], np.uint32).view(np.float32).reshape(3, *c["block_shape"])
              for c in cases}
    for c in cases:
        c.pop("d"), c.pop("block_shape")
        if drop_records:
            c["kernels"], c["heuristic"] = [], {}
    (tmp_path / "fit.json").write_text(json.dumps({"device": "NVIDIA H200", "torch": "2.11.0+cu130",
                                                   "cases": cases}))
    np.savez(tmp_path / "fit.npz", **blocks)
    return len(cases)


def score(tmp_path):
    out = tmp_path / "score.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the script imports no rpsim
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--name", "fit", "--eval", str(evaluator()),
                        "--json", str(out)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text()), r.stdout


def test_every_excerpt_gemm_is_bit_exact_from_its_record(tmp_path):
    n = capture(tmp_path)
    result, text = score(tmp_path)
    recorded = [result["kinds"][v]["recorded"] for v in result["kinds"]]
    assert sum(t for _, t in recorded) == n == 59
    assert all(ok == t for ok, t in recorded), text
    assert "held-out capture" in text and "recorded" in text


def test_without_records_the_guess_misses_some(tmp_path):
    """Records emptied: each GEMM falls back to the preset's guess ("nothing recorded"), which misses
    GEMMs of the excerpt; the score says so and names the fallback."""
    n = capture(tmp_path, drop_records=True)
    result, text = score(tmp_path)
    recorded = [result["kinds"][v]["recorded"] for v in result["kinds"]]
    assert sum(t for _, t in recorded) == n
    assert sum(ok for ok, _ in recorded) < n
    assert any("guessed" in fam for _, fam, _ in result["misses"]), text


def test_the_evaluator_refuses_a_record_without_a_preset():
    line = "10 17 500009 0 64 64 128 0 0 0 tc:h100:fp16:fp32 {\"cublas\": {}}\n"
    r = subprocess.run([str(evaluator())], input=line, capture_output=True, text=True)
    assert r.stdout.startswith("error: a record goes with a kernel preset")
