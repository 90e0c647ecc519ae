"""The cuBLASLt heuristic query capture_gemms records (experiments/python/rpsim/torch/_cublaslt.py) and
the heuristic-table generator (sim/accumulation/fit/cublas_heuristic_table.py), without a GPU: the call
PyTorch makes, mapped to cuBLASLt's column-major terms, and the ctypes plumbing (descriptors, layouts,
preferences, the opaque algorithm and its CONFIG attributes) against a stand-in library that checks what
it is given and answers as cuBLASLt would. The real library's answers are owed to a GPU session."""
import ctypes
import importlib.util
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(os.environ.get("RPSIM_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[3]))


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


lt = load("experiments/python/rpsim/torch/_cublaslt.py", "rpsim_cublaslt_test")


def as_int(buf, size, signed=False):
    return int.from_bytes(ctypes.string_at(buf, size), "little", signed=signed)


class FakeLt:
    """cuBLASLt's functions as Python callables: handles are counters, attributes are remembered, the
    heuristic answers with `config` (attribute id -> value) for algorithm 42."""

    def __init__(self, config, found=1):
        self.config, self.found = config, found
        self.desc, self.pref, self.layouts, self.layout_attrs = {}, {}, [], {}
        self.created, self.destroyed, self._next = [], [], 100

    def _new(self, ptr, what):
        self._next += 1
        ptr.contents.value = self._next
        self.created.append(what)
        return 0

    def cublasLtGetVersion(self):
        return 130100

    def cublasLtCreate(self, ptr):
        return self._new(ptr, "handle")

    def cublasLtMatmulDescCreate(self, ptr, compute, scale_type):
        self.compute = (compute, scale_type)
        return self._new(ptr, "desc")

    def cublasLtMatmulDescSetAttribute(self, desc, attr, buf, size):
        self.desc[attr] = as_int(buf, size, signed=True)
        return 0

    def cublasLtMatrixLayoutCreate(self, ptr, dtype, rows, cols, ld):
        self.layouts.append((dtype, rows, cols, ld))
        return self._new(ptr, "layout")

    def cublasLtMatrixLayoutSetAttribute(self, lay, attr, buf, size):
        self.layout_attrs.setdefault(attr, []).append(as_int(buf, size))
        return 0

    def cublasLtMatmulPreferenceCreate(self, ptr):
        return self._new(ptr, "pref")

    def cublasLtMatmulPreferenceSetAttribute(self, pref, attr, buf, size):
        self.pref[attr] = as_int(buf, size)
        return 0

    def cublasLtMatmulAlgoGetHeuristic(self, handle, desc, a, b, c, d, pref, requested, results, count):
        assert requested == 1
        res = ctypes.cast(results, ctypes.POINTER(lt.HeuristicResult))
        res[0].algo[0], res[0].state, res[0].workspaceSize, res[0].wavesCount = 42, 0, 4096, 0.75
        count.contents.value = self.found
        return 0

    def cublasLtMatmulAlgoConfigGetAttribute(self, algo, attr, buf, size, written):
        assert ctypes.cast(algo, ctypes.POINTER(ctypes.c_uint64))[0] == 42  # the algorithm it returned
        value = self.config.get(attr, 0)
        ctypes.memmove(buf, value.to_bytes(size, "little", signed=value < 0), size)
        written.contents.value = size
        return 0

    def _destroy(self, obj):
        self.destroyed.append(obj.value)
        return 0

    cublasLtDestroy = cublasLtMatmulDescDestroy = cublasLtMatrixLayoutDestroy = _destroy
    cublasLtMatmulPreferenceDestroy = _destroy


def test_torch_query_is_cublas_column_major_call():
    # torch: C[64, 32] = A[64, 1000] @ B[1000, 32] -> cuBLAS m = 32, n = 64, k = 1000, A_c = B, B_c = A.
    q = lt.torch_query(64, 32, 1000, "float16", "float16", "float16", reduced_precision_reduction=False)
    assert (q["m"], q["n"], q["k"], q["transa"], q["transb"]) == (32, 64, 1000, lt.OP_N, lt.OP_N)
    assert q["a"] == {"type": 2, "rows": 32, "cols": 1000, "ld": 32}
    assert q["b"] == {"type": 2, "rows": 1000, "cols": 64, "ld": 1000}
    assert q["d"] == {"type": 2, "rows": 32, "cols": 64, "ld": 32}
    assert q["compute"] == lt.COMPUTE_32F
    assert q["reduction_mask"] == lt.REDUCTION_MASK & ~lt.REDUCTION_OUTPUT_TYPE  # rpr off: no output-type merge
    # nn.Linear: B = W.t() stored column-major -> cuBLAS's A transposed, W's rows its leading dimension.
    q = lt.torch_query(64, 32, 1000, "bfloat16", "bfloat16", "float32", b_transposed=True)
    assert q["transa"] == lt.OP_T and q["a"] == {"type": 14, "rows": 1000, "cols": 32, "ld": 1000}
    assert q["reduction_mask"] == lt.REDUCTION_MASK
    assert lt.torch_query(8, 8, 8, "float32", "float32", "float32", allow_tf32=True)["compute"] == \
        lt.COMPUTE_32F_FAST_TF32
    assert lt.torch_query(8, 8, 8, "float32", "float32", "float32")["compute"] == lt.COMPUTE_32F
    with pytest.raises(ValueError, match="'int8' is not one of"):
        lt.torch_query(8, 8, 8, "int8", "int8", "int32")


def test_heuristic_reads_the_top_algorithm_config():
    fake = FakeLt({0: 66, 1: 18, 2: 3, 3: lt.REDUCTION_NONE, 5: 0, 6: 22, 8: 2})
    h = lt.CublasLt(lib=fake)
    q = lt.torch_query(64, 32, 4096, "float8_e4m3fn", "float8_e5m2", "bfloat16", b_transposed=True, batch=4,
                       fast_accum=True, reduced_precision_reduction=False, alignments={"a": 16, "d": 256},
                       scale_pointers=[0x1000, 0x2000], workspace=1 << 20)
    r = h.heuristic(q)
    assert (r["algo_id"], r["tile_id"], r["splitk_num"], r["reduction_scheme"], r["stages_id"]) == (66, 18, 3, 0, 22)
    assert r["cluster_shape_id"] == 2 and r["workspace_size"] == 4096 and r["version"] == 130100
    assert fake.compute == (lt.COMPUTE_32F, 0)
    assert fake.desc[lt.DESC_TRANSA] == lt.OP_T and fake.desc[lt.DESC_TRANSB] == lt.OP_N
    assert fake.desc[lt.DESC_FAST_ACCUM] == 1
    assert (fake.desc[lt.DESC_A_SCALE_POINTER], fake.desc[lt.DESC_B_SCALE_POINTER]) == (0x1000, 0x2000)
    assert fake.layouts[0] == (29, 4096, 32, 4096)  # cuBLAS's A: torch's e5m2 B, transposed
    assert fake.layouts[1] == (28, 4096, 64, 4096)
    assert fake.layout_attrs[lt.LAYOUT_BATCH_COUNT] == [4, 4, 4, 4]
    # The preferences torch's call sets: workspace, no output-type merge (rpr off and a bf16 D), alignments.
    assert fake.pref[lt.PREF_MAX_WORKSPACE_BYTES] == 1 << 20
    assert fake.pref[lt.PREF_REDUCTION_SCHEME_MASK] == lt.REDUCTION_MASK & ~lt.REDUCTION_OUTPUT_TYPE
    assert fake.pref[lt.PREF_MIN_ALIGNMENT["a"]] == 16 and fake.pref[lt.PREF_MIN_ALIGNMENT["d"]] == 256
    assert len(fake.destroyed) == fake.created.count("desc") + fake.created.count("layout") + 1  # all freed
    assert lt._alignment(0x1000) == 256 and lt._alignment(0x1008) == 8


def test_heuristic_without_an_algorithm_is_an_error():
    h = lt.CublasLt(lib=FakeLt({}, found=0))
    with pytest.raises(lt.CublasLtError, match="no algorithm for m=8 n=8 k=8"):
        h.heuristic(lt.torch_query(8, 8, 8, "float16", "float16", "float16"))


def test_generator_table_is_read_by_the_preset(tmp_path, run_cli):
    """The generator's table (heuristic answers from a stand-in) read by cublas:h100: gemm-check names
    the table as the schedule's source and runs its 5 slices where the measured grid says 3."""
    gen = load("sim/accumulation/fit/cublas_heuristic_table.py", "rpsim_cublas_table_gen")
    spec = tmp_path / "shapes.json"
    spec.write_text(json.dumps({"version": 1, "axes": {
        "m": {"from": 64, "to": 256, "points": 2, "multiple": 16},
        "n": {"from": 64, "to": 256, "points": 2, "multiple": 16},
        "k": {"from": 1024, "to": 4096, "points": 3, "multiple": 16, "unaligned_offset": -3}},
        "kinds": {"fp16:fp32": {"a": "float16", "b": "float16", "d": "float32"}}}))
    spec_json, axes, digest = gen.read_spec(spec)
    assert axes["k"] == [1021, 1024, 2045, 2048, 4093, 4096]

    class Answers:
        def heuristic(self, q):
            return {"algo_id": 66, "tile_id": 18, "stages_id": 22, "custom_option": 0,
                    "splitk_num": 5 if q["k"] == 4096 else 1, "reduction_scheme": 2}

    configs, first = {}, {}
    answers = gen.answer_kind(Answers(), lt, spec_json["kinds"]["fp16:fp32"], axes, 1 << 25)
    rows = gen.number_rows(*answers, configs, first)
    assert len(rows) == 4 and rows[0] == "1.1.2*5 1.5.2"
    out = tmp_path / "cublas-h100.txt"
    gen.write(str(out), "NVIDIA H100 80GB HBM3", "libcublasLt.so.13 130100", str(spec), digest, configs, {},
              {"fp16:fp32": rows}, axes)
    dump = tmp_path / "d.npz"
    env = dict(os.environ, RPSIM_CUBLAS_TABLES=str(tmp_path))
    binary = os.environ["RPSIM_BINARY"]
    subprocess.run([binary, "gemm", "--m", "64", "--n", "64", "--k", "4096", "--input", "fp16", "--model",
                    "cublas:h100:fp16:fp32", "--dump", str(dump)], check=True, env=env, capture_output=True)
    r = subprocess.run([binary, "gemm-check", str(dump), "--model", "cublas:h100:fp16:fp32"], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"schedule source: cuBLASLt heuristic table {out}: heuristic only" in r.stdout
    assert ":split_k=5" in r.stdout
    # Without the table: the measured grid's 3 slices, said to be a guess.
    r = run_cli("gemm-check", str(dump), "--model", "cublas:h100:fp16:fp32", check=False)
    assert "schedule source: guess: " in r.stdout and ":split_k=3" in r.stdout


def test_capture_asks_cublaslt_what_torch_calls(tmp_path):
    """capture_gemms' record of one GEMM (what it asks on a CUDA device), wired to the stand-in: the
    entry's dtypes, layout and flags become the query, the answer its "cublas.heuristic"; a CPU capture
    records nothing (no cuBLAS ran)."""
    torch = pytest.importorskip("torch")
    capture = pytest.importorskip("rpsim.torch._capture")
    fake = FakeLt({0: 66, 2: 4, 3: lt.REDUCTION_COMPUTE_TYPE})
    cap = capture.capture_gemms(tmp_path / "cap")
    cap._cublaslt = lt.CublasLt(lib=fake)
    a, b = torch.zeros(64, 1000, dtype=torch.float16), torch.zeros(32, 1000, dtype=torch.float16).t()
    d = torch.zeros(64, 32, dtype=torch.float16)
    info = {"m": 64, "n": 32, "k": 1000, "a_dtype": "float16", "b_dtype": "float16", "d_dtype": "float16",
            "c_dtype": None, "batch": None, "transposed": {"a": False, "b": True},
            "flags": {"allow_tf32": False, "allow_fp16_reduced_precision_reduction": False}}
    h = cap._heuristic(info, a, b, None, d, [])
    assert (h["algo_id"], h["splitk_num"], h["reduction_scheme"]) == (66, 4, lt.REDUCTION_COMPUTE_TYPE)
    assert h["query"]["m"] == 32 and h["query"]["n"] == 64 and h["query"]["transa"] == lt.OP_T
    assert fake.pref[lt.PREF_REDUCTION_SCHEME_MASK] == lt.REDUCTION_MASK & ~lt.REDUCTION_OUTPUT_TYPE
    # A library that cannot be loaded is recorded as the reason, once.
    cap._cublaslt = "CublasLtError: libcublasLt not found"
    assert cap._heuristic(info, a, b, None, d, []) == {"error": "CublasLtError: libcublasLt not found"}
    with capture.capture_gemms(tmp_path / "cpu") as c2:
        torch.mm(torch.ones(4, 8), torch.ones(8, 2))
    assert "cublas" not in c2.manifest["gemms"][0]
