"""The benchmarks that compare against PyTorch or NumPy state the BLAS their baseline calls and
refuse a ratio against the reference BLAS (experiments/bench/bench_blas.py, issue #38)."""
import os
import subprocess
import sys

import pytest

NETLIB = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"
ALTERNATIVE = "/usr/lib/x86_64-linux-gnu/libblas.so.3"
OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"


@pytest.fixture(scope="module")
def bench_dir(source_dir):
    return source_dir / "experiments" / "bench"


@pytest.fixture(scope="module")
def bench_blas(bench_dir):
    sys.path.insert(0, str(bench_dir))
    import bench_blas
    return bench_blas


def test_the_libblas_mapped_decides(bench_blas):
    kind = bench_blas.blas_kind
    assert kind([OPENBLAS, "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so"]) == "optimised"
    assert kind(["/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0"]) == "reference"
    # netlib's libblas first on the path beside OpenBLAS's liblapack: the matmuls are netlib's.
    assert kind(["/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0",
                 "/usr/lib/x86_64-linux-gnu/openblas-pthread/liblapack.so.3",
                 "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so"]) == "reference"
    # A wheel's own BLAS, no libblas.so.
    assert kind(["/x/numpy.libs/libopenblas64_p-r0-15028c96.3.21.so"]) == "optimised"
    assert kind(["/opt/intel/lib/libmkl_rt.so.2"]) == "optimised"
    assert kind([]) == "none"


def test_mapped_libraries_are_read_from_the_maps(bench_blas):
    maps = ("7f0-7f1 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0\n"
            "7f1-7f2 r--p 00000000 08:01 2 /usr/lib/x86_64-linux-gnu/libm.so.6\n"
            "7f2-7f3 r-xp 00000000 08:01 3 /usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0\n"
            "7f3-7f4 rw-p 00000000 00:00 0 \n"
            "7f4-7f5 r-xp 00000000 08:01 4 /usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3.11.0\n")
    assert bench_blas.mapped_blas(maps) == ["/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0",
                                            "/usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3.11.0"]


def test_reference_blas_is_refused_unless_allowed(bench_blas, monkeypatch, capsys):
    monkeypatch.setattr(bench_blas, "mapped_blas", lambda: ["/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0"])
    with pytest.raises(SystemExit) as e:
        bench_blas.check(False)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "refused" in err and "blas/libblas.so.3.11.0" in err and "libopenblas0-pthread" in err
    lines = []
    assert bench_blas.check(True, out=lines.append) == "reference"
    assert "reference" in lines[0] and "REFERENCE BLAS" in lines[1]
    monkeypatch.setattr(bench_blas, "mapped_blas", lambda: [OPENBLAS])
    lines = []
    assert bench_blas.check(False, out=lines.append) == "optimised"
    assert lines == [f"BLAS mapped: {OPENBLAS} (optimised); "]


def test_this_machine_runs_numpy_on_the_blas_its_alternative_names(bench_blas):
    import numpy
    if not os.path.exists(ALTERNATIVE):
        pytest.skip(f"no {ALTERNATIVE}: not a Debian multiarch BLAS set-up")
    lines = []
    kind = bench_blas.check(True, numpy=numpy, out=lines.append)
    expected = "optimised" if "openblas" in os.path.realpath(ALTERNATIVE) else "reference"
    assert kind == expected, lines
    assert f"NumPy {numpy.__version__}" in lines[0]


@pytest.mark.parametrize("script,needs", [("bench_train_torch.py", "torch"), ("bench_telemetry.py", "torch"),
                                          ("bench_reference_models.py", "numpy")])
def test_each_baseline_benchmark_refuses_the_reference_blas(bench_dir, script, needs):
    """Each benchmark against PyTorch or NumPy, run with netlib's folder first on the library path,
    stops before measuring, exit status 2, naming the library."""
    if not os.path.exists(NETLIB):
        pytest.skip(f"no reference BLAS at {NETLIB} to run against (Debian's libblas3)")
    pytest.importorskip(needs)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(NETLIB))
    r = subprocess.run([sys.executable, str(bench_dir / script)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{script}: refused" in r.stderr and "/blas/libblas.so" in r.stderr
    assert "|" not in r.stdout  # no ratio table
