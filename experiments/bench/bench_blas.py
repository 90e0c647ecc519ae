"""The BLAS a PyTorch or NumPy baseline really calls, said and checked (issue #38).

Debian's python3-torch and python3-numpy are built against the generic `libblas.so.3`
(torch.__config__ says BLAS_INFO=generic, numpy.show_config says `blas`): which library runs is
whatever that alternative points at. The reference (netlib) BLAS is 8-15x slower than OpenBLAS on
a training step's matmuls here, so a ratio against a baseline on it flatters rpsim. The set-up
installs OpenBLAS (libopenblas0-pthread), which takes the alternative over; a benchmark that
compares against PyTorch or NumPy says which library its process mapped after a matmul, and
refuses to print a ratio on the reference BLAS unless told --allow-reference-blas (the ratios are
then marked).
"""
import os
import re
import sys

# Where the libraries live, by kind (Debian's paths and the libraries' own names).
OPTIMISED = ("openblas", "mkl", "blis", "atlas", "armpl", "accelerate")


def mapped_blas(maps_text=None):
    """The BLAS and LAPACK libraries mapped into this process (full paths, sorted)."""
    if maps_text is None:
        with open("/proc/self/maps") as f:
            maps_text = f.read()
    paths = set()
    for line in maps_text.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[-1].startswith("/"):
            name = os.path.basename(fields[-1]).lower()
            if any(k in name for k in ("blas", "lapack", "mkl", "blis")):
                paths.add(fields[-1])
    return sorted(paths)


def blas_kind(paths):
    """'optimised' or 'reference' by the libblas.so.3 mapped (the soname Debian's torch and numpy
    link: netlib's in /usr/lib/<arch>/blas/, OpenBLAS's in openblas-pthread/, ...); without one, by
    any optimised BLAS mapped (a wheel's own OpenBLAS or MKL); 'none' when no BLAS is mapped.
    Only the libblas decides when it is mapped: netlib's libblas beside OpenBLAS's liblapack (a
    LD_LIBRARY_PATH that reaches netlib's folder first) still runs the reference matmuls."""
    libblas = [p for p in paths if os.path.basename(p).startswith("libblas.so")]
    candidates = libblas or paths
    if any(k in p.lower() for p in candidates for k in OPTIMISED):
        return "optimised"
    return "reference" if libblas else "none"


def exercise(torch=None, numpy=None):
    """A matmul in each library given, so that its BLAS is loaded and mapped."""
    if torch is not None:
        torch.rand(64, 64) @ torch.rand(64, 64)
    if numpy is not None:
        numpy.ones((64, 64)) @ numpy.ones((64, 64))


def add_argument(parser):
    parser.add_argument("--allow-reference-blas", action="store_true",
                        help="report ratios even when the baseline runs on the reference BLAS (marked so)")


def describe(torch=None, numpy=None):
    """One line: the libraries mapped, and what the builds say of themselves."""
    paths = mapped_blas()
    builds = []
    if torch is not None:
        info = re.search(r"\bBLAS_INFO=([^,\s]+)", torch.__config__.show())
        builds.append(f"PyTorch {torch.__version__} built with BLAS_INFO={info.group(1) if info else '?'}")
    if numpy is not None:
        builds.append(f"NumPy {numpy.__version__}")
    mapped = ", ".join(paths) or "no separate BLAS library (linked in statically, or none)"
    return f"BLAS mapped: {mapped} ({blas_kind(paths)}); " + "; ".join(builds)


def check(allow_reference, torch=None, numpy=None, out=print):
    """States the baseline's BLAS and returns its kind; on the reference BLAS, refuses (a message on
    stderr, SystemExit 2) unless `allow_reference`. Call before measuring: a refusal costs no
    benchmark time."""
    exercise(torch, numpy)
    paths = mapped_blas()
    kind = blas_kind(paths)
    out(describe(torch, numpy))
    if kind == "reference":
        libblas = [p for p in paths if os.path.basename(p).startswith("libblas.so")]
        message = ("the PyTorch/NumPy baseline calls the reference BLAS (" + ", ".join(libblas) + "), 8-15x slower "
                   "than OpenBLAS here (a 128x784x256 float matmul: 8.7 ms against 0.57 ms quiet, 14 ms against "
                   "1.8 ms at load 12), so a ratio to it flatters rpsim. Install "
                   "libopenblas0-pthread (it takes the libblas.so.3 alternative), or put its openblas-pthread "
                   "folder first on LD_LIBRARY_PATH")
        if not allow_reference:
            print(f"{os.path.basename(sys.argv[0])}: refused: {message}; --allow-reference-blas reports the "
                  "ratios anyway, marked", file=sys.stderr)
            raise SystemExit(2)
        out(f"WARNING, ratios below are against the REFERENCE BLAS: {message}")
    return kind
