"""rpsim.torch.capture_gemms and `rpsim gemm-check DIR` / rpsim.gemm_check(DIR): a LLaMA-style
block's forward and backward captured on the CPU (every GEMM its structure implies), each D
replaced by rpsim.gemm under a named model so the check must pass, one D element perturbed so it
must fail there; and the bad inputs (non-empty directory, missing files, no model for the CPU)."""
import json
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="rpsim.torch needs PyTorch (apt-get install python3-torch)")
import rpsim  # noqa: E402
import rpsim.torch as rt  # noqa: E402

MODEL = "cublas:h100:bf16:bf16:rpr=0"  # a bf16-in, bf16-out model: what autocast(bfloat16) GEMMs are
B, T, D, H, F = 2, 8, 16, 2, 24


class RMSNorm(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def rotary(x):
    """Rotary position embedding (RoFormer): pairs of channels rotated by position * frequency."""
    t, hd = x.shape[-2], x.shape[-1]
    freq = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    ang = torch.arange(t, dtype=torch.float32)[:, None] * freq[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)


class LlamaBlock(torch.nn.Module):
    """Pre-norm attention (rotary, causal) and a SwiGLU MLP, bias-free projections."""

    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(D), RMSNorm(D)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(D, D, bias=False) for _ in range(4))
        self.w1, self.w3 = torch.nn.Linear(D, F, bias=False), torch.nn.Linear(D, F, bias=False)
        self.w2 = torch.nn.Linear(F, D, bias=False)

    def forward(self, x):
        h = self.norm1(x)
        split = lambda t: t.view(B, T, H, D // H).transpose(1, 2)  # noqa: E731
        q, k, v = rotary(split(self.q(h))), rotary(split(self.k(h))), split(self.v(h))
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D // H)
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        x = x + self.o(torch.matmul(att, v).transpose(1, 2).reshape(B, T, D))
        h = self.norm2(x)
        return x + self.w2(torch.nn.functional.silu(self.w1(h)) * self.w3(h))


# From the structure: 7 bias-free projections are one mm forward and two backward (input and
# weight gradient); the two attention matmuls one bmm forward and two backward.
EXPECTED_CALLS = {"mm": 7 * 3, "bmm": 2 * 3}


def model_d(arrays, g, model=MODEL):
    """D as `model` gives it, with the epilogue rpsim gemm-check documents."""
    a, b, c = arrays["A"], arrays["B"], arrays.get("C")
    if g["alpha"] == 1 and g["beta"] in (0, 1):
        return rpsim.gemm(a, b, c if g["beta"] == 1 else None, model, round_inputs=False)
    ab = rpsim.gemm(a, b, None, model, round_inputs=False)
    return rpsim.round(g["alpha"] * ab + (g["beta"] * c if c is not None else 0), "bfloat16")


def capture_step(directory, **kw):
    torch.manual_seed(0)
    block = LlamaBlock()
    x = torch.randn(B, T, D)
    with rt.capture_gemms(directory, **kw) as cap:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = block(x)
        y.float().pow(2).mean().backward()
    return cap.manifest


def rewrite_d(directory, manifest):
    for g in manifest["gemms"]:
        path = os.path.join(directory, g["file"])
        arrays = dict(np.load(path))
        arrays["D"] = model_d(arrays, g).astype(np.float32)
        np.savez(path, **arrays)


@pytest.fixture()
def captured(tmp_path):
    directory = str(tmp_path / "step")
    manifest = capture_step(directory, batch_sample=B * H)
    rewrite_d(directory, manifest)
    return directory, manifest


def test_every_gemm_of_the_block_is_captured(captured):
    directory, m = captured
    calls = {}
    for g in m["gemms"]:
        calls.setdefault(g["call"], g["op"])
    counted = {op: sum(1 for v in calls.values() if v == op) for op in EXPECTED_CALLS}
    assert counted == EXPECTED_CALLS and len(calls) == sum(EXPECTED_CALLS.values())
    assert m["skipped"] == [] and m["calls"] == sum(EXPECTED_CALLS.values())
    bmm_files = [g for g in m["gemms"] if g["op"] == "bmm"]
    assert len(bmm_files) == EXPECTED_CALLS["bmm"] * B * H  # every batch element kept
    assert {g["a_dtype"] for g in m["gemms"]} == {"bfloat16"} and {g["device"] for g in m["gemms"]} == {"cpu"}
    assert sum(g["phase"] == "forward" for g in m["gemms"] if g["op"] == "mm") == 7
    assert any(g["transposed"]["b"] for g in m["gemms"])  # nn.Linear hands the kernel W^T
    assert sorted(os.listdir(directory)) == sorted([g["file"] for g in m["gemms"]] + ["manifest.json"])
    with open(os.path.join(directory, "manifest.json")) as f:
        assert json.load(f) == m


def test_cli_passes_every_gemm_and_python_agrees(captured, run_cli):
    directory, _ = captured
    r = run_cli("gemm-check", directory, "--model", MODEL)
    n = sum(EXPECTED_CALLS.values())
    assert r.stdout.rstrip().endswith(f"{n} passed, 0 failed")
    assert "bit-exact/total" in r.stdout and "max ulps" in r.stdout and MODEL in r.stdout
    res = rpsim.gemm_check(directory, model=MODEL)
    assert res.ok and res.passed == n and res.failed == 0 and res.mismatches == []
    assert all(row["passed"] == row["total"] > 0 for row in res.rows)
    assert res.table == r.stdout


def test_one_perturbed_element_fails_and_is_named(captured, run_cli):
    directory, m = captured
    g = next(g for g in m["gemms"] if g["op"] == "bmm")
    path = os.path.join(directory, g["file"])
    arrays = dict(np.load(path))
    d = arrays["D"].copy()
    d[1, 2] = rpsim.round(np.array([d[1, 2] * (1 + 2.0 ** -7)], dtype=np.float64), "bfloat16")[0]
    assert d[1, 2] != arrays["D"][1, 2]
    arrays["D"] = d
    np.savez(path, **arrays)
    r = run_cli("gemm-check", directory, "--model", MODEL, check=False)
    assert r.returncode == 1
    assert f"{g['file']}: D[1, 2] = " in r.stdout
    assert r.stdout.rstrip().endswith(f"{sum(EXPECTED_CALLS.values()) - 1} passed, 1 failed")
    res = rpsim.gemm_check(directory, model=MODEL)
    assert not res and res.failed == 1 and len(res.mismatches) == 1 and "D[1, 2]" in res.mismatches[0]


def test_a_model_recorded_at_capture_is_used(tmp_path, run_cli):
    directory = str(tmp_path / "rec")
    manifest = capture_step(directory, model=MODEL)
    rewrite_d(directory, manifest)
    r = run_cli("gemm-check", directory)
    assert r.stdout.rstrip().endswith(f"{sum(EXPECTED_CALLS.values())} passed, 0 failed")
    assert "not checked" in r.stdout and "batch sampling" in r.stdout  # default batch_sample=2 of B*H=4


def test_alpha_beta_epilogues_and_addmm(tmp_path):
    directory = str(tmp_path / "ab")
    torch.manual_seed(1)
    lin = torch.nn.Linear(8, 6)
    x = torch.randn(2, 5, 8, requires_grad=True)
    with rt.capture_gemms(directory, batch_sample=2) as cap:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = lin(x.view(10, 8)).view(2, 5, 6)
            z = torch.baddbmm(y[:, :, :5], y, y.transpose(1, 2), beta=0.5, alpha=0.25)
        z.float().sum().backward()
    m = cap.manifest
    ops = {(g["op"], g["alpha"], g["beta"]) for g in m["gemms"]}
    assert ("addmm", 1.0, 1.0) in ops and ("baddbmm", 0.25, 0.5) in ops
    rewrite_d(directory, m)
    res = rpsim.gemm_check(directory, model=MODEL)
    assert res.ok and any("alpha=0.25 beta=0.5" in row["note"] for row in res.rows)


def test_size_cap_and_batch_sampling_say_what_was_skipped(tmp_path):
    m = capture_step(str(tmp_path / "cap"), max_elements=400, batch_sample=1)
    reasons = " ".join(s["reason"] for s in m["skipped"])
    assert "max_elements=400" in reasons and "batch sampling: 1 of 4" in reasons
    assert all(g["m"] * g["k"] + g["k"] * g["n"] + 2 * g["m"] * g["n"] <= 400 for g in m["gemms"])


def test_a_non_empty_directory_needs_overwrite(tmp_path):
    directory = tmp_path / "cap"
    directory.mkdir()
    (directory / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        capture_step(str(directory))
    with pytest.raises(FileExistsError, match="notes.txt"):
        capture_step(str(directory), overwrite=True)  # never deletes what is not a capture's
    os.remove(directory / "notes.txt")
    first = capture_step(str(directory))
    again = capture_step(str(directory), overwrite=True)
    assert len(again["gemms"]) == len(first["gemms"])
    assert sorted(os.listdir(directory)) == sorted([g["file"] for g in again["gemms"]] + ["manifest.json"])


def test_a_full_disk_leaves_no_partial_gemm_file(tmp_path, monkeypatch):
    """np.savez straight into the folder left a truncated g*.npz, listed nowhere, when the disk
    filled; each file is now written beside and renamed, so what is there is whole and listed."""
    import errno
    real, calls = np.savez, []

    def savez_until_full(f, **arrays):
        calls.append(1)
        if len(calls) == 3:
            f.write(b"PK\x03\x04 half a zip")
            raise OSError(errno.ENOSPC, "No space left on device")
        real(f, **arrays)

    monkeypatch.setattr(np, "savez", savez_until_full)
    directory = tmp_path / "cap"
    with pytest.raises(OSError, match="capture_gemms: writing .*g00002_.*npz failed: No space left"):
        capture_step(str(directory))
    manifest = json.loads((directory / "manifest.json").read_text())
    assert [g["file"] for g in manifest["gemms"]] == sorted(p for p in os.listdir(directory) if p.endswith(".npz"))
    assert len(manifest["gemms"]) == 2
    assert sorted(os.listdir(directory)) == sorted([g["file"] for g in manifest["gemms"]] + ["manifest.json"])
    for g in manifest["gemms"]:
        assert set(np.load(directory / g["file"]).files) >= {"A", "B", "D"}


def test_missing_files_and_missing_models_exit_2(captured, run_cli):
    directory, m = captured
    r = run_cli("gemm-check", directory, check=False)
    assert r.returncode == 2 and "captured on the CPU" in r.stderr and "--model" in r.stderr
    with pytest.raises(ValueError, match="captured on the CPU"):
        rpsim.gemm_check(directory)
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    for g in manifest["gemms"]:
        g["device"] = "NVIDIA A100-SXM4-80GB"
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    r = run_cli("gemm-check", directory, check=False)
    assert r.returncode == 2 and "NVIDIA A100-SXM4-80GB" in r.stderr and "--infer" in r.stderr
    gone = [m["gemms"][0]["file"], m["gemms"][5]["file"]]
    for name in gone:
        os.remove(os.path.join(directory, name))
    r = run_cli("gemm-check", directory, "--model", MODEL, check=False)
    assert r.returncode == 2 and "2 of the files it lists are missing" in r.stderr
    assert all(name in r.stderr for name in gone)


def test_an_h100_capture_selects_its_preset(captured):
    directory, _ = captured
    path = os.path.join(directory, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    for g in manifest["gemms"]:
        g["device"] = "NVIDIA H100 80GB HBM3"
        g["flags"]["allow_bf16_reduced_precision_reduction"] = False
    with open(path, "w") as f:
        json.dump(manifest, f)
    res = rpsim.gemm_check(directory)  # no model: the device and flags pick cublas:h100:bf16:bf16:rpr=0
    assert res.ok and {row["model"] for row in res.rows} == {MODEL}


def test_scaled_mm_calls_are_recorded_with_their_scales(tmp_path):
    """torch 1.13 has no _scaled_mm: its call is fed to the recorder as a newer torch's dispatcher
    would (positional scales, an (out, amax) pair), with bf16 stand-ins for the FP8 operands."""
    directory = str(tmp_path / "fp8")
    a = torch.randn(4, 32).bfloat16()
    b = torch.randn(6, 32).bfloat16().t()  # column-major, as _scaled_mm requires
    d = torch.mm(a.float(), b.float()).bfloat16()
    two = torch.tensor(2.0)
    with rt.capture_gemms(directory) as cap:
        cap._record("_scaled_mm", (a, b, two, torch.tensor(1.0)), {"use_fast_accum": True}, (d, two))
    g = cap.manifest["gemms"][0]
    assert g["op"] == "_scaled_mm" and g["scales"] == {"scale_a": [2.0], "scale_b": [1.0]}
    assert g["use_fast_accum"] is True and g["transposed"]["b"] and (g["m"], g["n"], g["k"]) == (4, 6, 32)
    # Checked through the schedule's scale_epilogue (per tensor without C the measured product, said
    # in the note): D as the model's A B times scale_a = 2 passes, the unscaled D does not.
    res = rpsim.gemm_check(directory, model=MODEL)
    assert res.skipped == 0 and len(res.rows) == 1
    assert res.rows[0]["note"] == "scales != 1 by scale_epilogue=product: measured (per tensor)"
    assert not res.ok
    path = os.path.join(directory, g["file"])
    arrays = dict(np.load(path))
    arrays["D"] = (2 * rpsim.gemm(arrays["A"], arrays["B"], None, MODEL, round_inputs=False)).astype(arrays["D"].dtype)
    np.savez(path, **arrays)
    res = rpsim.gemm_check(directory, model=MODEL)
    assert res.ok and res.rows[0]["passed"] == res.rows[0]["total"]


def test_scaled_mm_fast_accum_is_read_from_its_position(tmp_path):
    """Under a dispatch mode aten::_scaled_mm's use_fast_accum arrives as args[7], not a keyword (the
    H200 captures recorded False for every call before this was read)."""
    a = torch.randn(4, 32).bfloat16()
    b = torch.randn(6, 32).bfloat16().t()
    d = torch.mm(a.float(), b.float()).bfloat16()
    one = torch.tensor(1.0)
    for fast in (True, False):
        directory = str(tmp_path / f"fast{fast}")
        with rt.capture_gemms(directory) as cap:
            cap._record("_scaled_mm", (a, b, one, one, None, None, torch.bfloat16, fast), {}, (d, one))
        assert cap.manifest["gemms"][0]["use_fast_accum"] is fast


def test_infer_searches_each_call(captured, run_cli):
    directory, _ = captured
    r = run_cli("gemm-check", directory, "--infer")
    n = sum(EXPECTED_CALLS.values())
    assert r.stdout.rstrip().endswith(f"{n} passed, 0 failed")
    assert r.stdout.count("reproduce it") == n and "preset cublas:h100:bfloat16:bfloat16" in r.stdout


def test_each_gemm_takes_the_first_model_of_its_dtypes(tmp_path):
    """A head outside autocast multiplies in float32: a list of models covers both kinds."""
    directory = str(tmp_path / "mixed")
    torch.manual_seed(2)
    body, head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 3)
    with rt.capture_gemms(directory) as cap:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = body(torch.randn(4, 8))
        head(h.float()).sum().backward()
    fp32 = "cublas:h100:tf32:fp32"
    for g in cap.manifest["gemms"]:
        path = os.path.join(directory, g["file"])
        arrays = dict(np.load(path))
        arrays["D"] = model_d(arrays, g, MODEL if g["a_dtype"] == "bfloat16" else fp32).astype(arrays["D"].dtype)
        np.savez(path, **arrays)
    assert {g["a_dtype"] for g in cap.manifest["gemms"]} == {"bfloat16", "float32"}
    res = rpsim.gemm_check(directory, model=[MODEL, fp32])
    assert res.ok and {row["model"] for row in res.rows} == {MODEL, fp32}
    with pytest.raises(ValueError, match="float32|binary32"):
        rpsim.gemm_check(directory, model=MODEL)


def test_convolutions_are_listed_as_not_exposed(tmp_path):
    conv = torch.nn.Conv2d(3, 4, 3)
    with rt.capture_gemms(str(tmp_path / "conv")) as cap:
        conv(torch.randn(2, 3, 8, 8)).sum().backward()
    assert cap.manifest["gemms"] == [] and len(cap.manifest["skipped"]) == 2  # forward and backward
    assert all("convolution" in s["reason"] for s in cap.manifest["skipped"])
    res = rpsim.gemm_check(str(tmp_path / "conv"))
    assert res.skipped == 2 and res.passed == res.failed == 0 and "convolution" in res.table


# ---- The LLaMA-style example of experiments/python/examples (issue #28's done-when) ----
LLAMA = dict(vocab=32, dim=16, layers=2, heads=2, hidden=24, max_seq=8)
LB, LT = 2, 8  # batch and sequence length of the captured step


def llama_expected(model, llama_style):
    """GEMM calls the model's structure implies for one forward+backward: every bias-free
    nn.Linear is one mm forward and two backward (its input's gradient: the embedding below makes
    every activation need one; and its weight's), every Attention two batched matmuls
    (q k^T, p v), each one bmm forward and two backward."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    attns = [m for m in model.modules() if isinstance(m, llama_style.Attention)]
    assert all(m.bias is None for m in linears)  # otherwise addmm, not mm
    assert len(linears) == 7 * LLAMA["layers"] + 1 and len(attns) == LLAMA["layers"]  # wq wk wv wo w1 w2 w3, head
    return {"mm": 3 * len(linears), "bmm": 3 * 2 * len(attns)}, {"mm": len(linears), "bmm": 2 * len(attns)}


def test_llama_example_every_gemm_is_captured_and_gemm_check_passes(tmp_path, run_cli, source_dir):
    import sys
    sys.path.insert(0, str(source_dir / "experiments" / "python" / "examples"))
    import llama_style
    model = llama_style.make_model(**LLAMA)
    ids = torch.randint(0, LLAMA["vocab"], (LB, LT + 1), generator=torch.Generator().manual_seed(3))
    directory = str(tmp_path / "llama")
    batch = LB * LLAMA["heads"]
    with rt.capture_gemms(directory, batch_sample=batch) as cap:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(ids[:, :-1])
        torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten()).backward()
    m = cap.manifest
    expected, forward = llama_expected(model, llama_style)
    ops = {}
    for g in m["gemms"]:
        ops.setdefault(g["call"], g)
    assert {op: sum(g["op"] == op for g in ops.values()) for op in expected} == expected
    assert {op: sum(g["op"] == op and g["phase"] == "forward" for g in ops.values()) for op in forward} == forward
    assert m["calls"] == len(ops) == sum(expected.values()) and m["skipped"] == []
    assert sum(g["op"] == "bmm" for g in m["gemms"]) == expected["bmm"] * batch  # every (batch, head) kept
    # The shapes the structure gives: the head's forward is (B*T x dim) x (dim x vocab).
    assert any((g["m"], g["n"], g["k"]) == (LB * LT, LLAMA["vocab"], LLAMA["dim"]) for g in ops.values())
    assert {g["a_dtype"] for g in m["gemms"]} == {"bfloat16"}
    rewrite_d(directory, m)
    r = run_cli("gemm-check", directory, "--model", MODEL)
    n = sum(expected.values())
    assert r.stdout.rstrip().endswith(f"{n} passed, 0 failed"), r.stdout[-2000:]
